//! A second corpus, different in kind from [`crate::generate`]: what a real
//! week of transcripts looks like rather than a planted-value test bed.
//! Many short lines, config files in ten formats, code in eight languages,
//! shell sessions, prose with credentials typed the way people type them,
//! non-ASCII prose in seven scripts plus emoji (about a tenth of the
//! lines), and dense identities. Deterministic from its seed.

use crate::{Rng, Truth, ALNUM, B64, HEX};

const PROSE: &[&str] = &[
    "请帮我检查一下这个配置文件，为什么服务启动失败了？日志里只有超时。",
    "数据库迁移已经完成，但是测试还有两个失败，我们先看看第一个。",
    "このエラーは依存関係のバージョンが古いことが原因だと思います。更新してみてください。",
    "ビルドは成功しましたが、警告がいくつか残っています 🙂",
    "Проверь, пожалуйста, почему тесты падают только на CI, а локально всё проходит.",
    "Я обновил README и добавил пример конфигурации для продакшена.",
    "هل يمكنك مراجعة هذا التغيير قبل الدمج؟ أعتقد أن هناك مشكلة في المعالجة.",
    "कृपया इस फ़ंक्शन का परीक्षण जोड़ें और त्रुटि संदेश को स्पष्ट करें।",
    "Μπορείς να ελέγξεις γιατί αποτυγχάνει η μεταγλώττιση στο παράθυρο;",
    "이 함수는 너무 길어요. 작은 함수로 나눠 주시겠어요? 🚀",
    "Ça marche ! Merci — j'ai vérifié la sortie, tout est réglé. ✅",
    "Die Änderung ist fertig; bitte prüfe noch die Übersetzungen für „Größe“.",
    "deploy finished 🎉🎉 — all green, p95 latency down to 41 ms 📉",
];

const ASCII_PROSE: &[&str] = &[
    "Let me look at the failing test first.",
    "Done. I updated the handler and added a regression test.",
    "The build passes now; two warnings remain in the generated code.",
    "I'll read the config and then run the migration.",
    "ok",
    "yes, go ahead",
    "Now run the full test suite.",
    "The token refresh logic lives in auth/session.rs; the secret is read from the environment.",
    "See the password policy section in docs/security.md before changing it.",
];

fn config(r: &mut Rng, i: usize) -> String {
    let host = format!("db-{}.internal.example.com", r.below(9));
    match i % 10 {
        0 => format!("[database]\nhost = \"{host}\"\nport = 5432\nuser = \"app\"\npool_size = {}\n\n[server]\nbind = \"0.0.0.0:8080\"\nworkers = 4\n", r.below(64)),
        1 => format!("server:\n  port: 8080\n  name: api\ndatabase:\n  host: {host}\n  name: orders\n  timeout: 30s\nfeatures:\n  - search\n  - export\n"),
        2 => format!("{{\n  \"name\": \"web\",\n  \"version\": \"1.{}.0\",\n  \"scripts\": {{\"build\": \"vite build\", \"test\": \"vitest\"}},\n  \"dependencies\": {{\"react\": \"^18.2.0\"}}\n}}\n", r.below(20)),
        3 => format!("NODE_ENV=production\nPORT=3000\nLOG_LEVEL=info\nDATABASE_HOST={host}\nCACHE_TTL={}\n", r.below(999)),
        4 => "<configuration>\n  <appSettings>\n    <add key=\"Environment\" value=\"Staging\" />\n    <add key=\"Retries\" value=\"3\" />\n  </appSettings>\n</configuration>\n".into(),
        5 => format!("spring.datasource.url=jdbc:postgresql://{host}:5432/app\nspring.jpa.hibernate.ddl-auto=validate\nserver.port=8081\n"),
        6 => "server {\n    listen 443 ssl;\n    server_name example.com;\n    location / {\n        proxy_pass http://127.0.0.1:8080;\n    }\n}\n".into(),
        7 => "FROM rust:1.82 AS build\nWORKDIR /src\nCOPY . .\nRUN cargo build --release\nFROM debian:bookworm-slim\nCOPY --from=build /src/target/release/app /usr/local/bin/\n".into(),
        8 => format!("resource \"aws_instance\" \"web\" {{\n  ami           = \"ami-{}\"\n  instance_type = \"t3.micro\"\n  tags = {{ Name = \"web\" }}\n}}\n", r.s(HEX, 17)),
        _ => "[Unit]\nDescription=API server\nAfter=network.target\n\n[Service]\nExecStart=/usr/local/bin/api --config /etc/api.toml\nRestart=on-failure\n".into(),
    }
}

fn code(r: &mut Rng, i: usize) -> String {
    let n = r.below(100);
    match i % 8 {
        0 => format!("pub fn parse(input: &str) -> Result<Vec<u32>, Error> {{\n    input.split(',').map(|s| s.trim().parse().map_err(Error::from)).collect()\n}}\n// limit {n}\n"),
        1 => format!("def handler(event, context):\n    items = [x for x in event[\"items\"] if x[\"qty\"] > {n}]\n    return {{\"count\": len(items)}}\n"),
        2 => format!("export async function load(id) {{\n  const res = await fetch(`/api/items/${{id}}`);\n  if (!res.ok) throw new Error(res.statusText);\n  return res.json(); // {n}\n}}\n"),
        3 => format!("func (s *Server) Get(w http.ResponseWriter, r *http.Request) {{\n\tid := r.URL.Query().Get(\"id\")\n\tfmt.Fprintf(w, \"%s %d\", id, {n})\n}}\n"),
        4 => format!("public class OrderService {{\n    private final Repo repo;\n    public Order find(long id) {{ return repo.findById(id).orElseThrow(); }} // {n}\n}}\n"),
        5 => format!("<?php\nfunction total(array $rows): int {{\n    return array_sum(array_column($rows, 'qty')) + {n};\n}}\n"),
        6 => format!("class Cart\n  def total\n    items.sum {{ |i| i.price * i.qty }} + {n}\n  end\nend\n"),
        _ => format!("public async Task<IActionResult> Get(int id)\n{{\n    var item = await _db.Items.FindAsync(id);\n    return item is null ? NotFound() : Ok(item); // {n}\n}}\n"),
    }
}

/// A leak line's text, its kind (for the per-kind table) and the values
/// in it a scanner should find: (class, value) — `secret` for a
/// credential, `identity` for the user's name (abcd-only).
type Leak = (String, &'static str, Vec<(&'static str, String)>);

/// Credentials as people leave them in transcripts (all random).
fn leak(r: &mut Rng, i: usize) -> Leak {
    let pw = format!("{}{}!", r.s(ALNUM, 10), r.below(100));
    let sec = |text: String, kind, v: &str| (text, kind, vec![("secret", v.to_string())]);
    match i % 12 {
        0 => {
            let v = r.s(B64, 40);
            let t = format!("aws configure set aws_secret_access_key {v}");
            sec(t, "aws-cli-secret", &v)
        }
        1 => sec(
            format!("docker login -u bob -p {pw}"),
            "docker-login-password",
            &pw,
        ),
        2 => sec(
            format!("curl -u bob:{pw} https://api.example.com/v1/items"),
            "curl-user-password",
            &pw,
        ),
        3 => sec(
            format!("sshpass -p '{pw}' ssh deploy@203.0.113.7"),
            "sshpass-password",
            &pw,
        ),
        4 => {
            let v = r.s(HEX, 32);
            sec(
                format!("the api key for the geocoder: {v}"),
                "prose-api-key",
                &v,
            )
        }
        5 => {
            let v = r.s(HEX, 32);
            let t = format!("machine api.heroku.com\n  login zed@example.org\n  password {v}");
            sec(t, "netrc-password", &v)
        }
        6 => {
            let v = format!("ghp_{}", r.s(ALNUM, 36));
            sec(format!("GITHUB_TOKEN={v}"), "github-pat", &v)
        }
        7 => {
            let t = format!(
                "postgres://app:{pw}@10.0.{}.{}:5432/prod",
                r.below(255),
                r.below(255)
            );
            sec(t, "credential-url", &pw)
        }
        8 => {
            let v = r.s(ALNUM, 40);
            sec(format!("Authorization: Bearer {v}"), "bearer-token", &v)
        }
        9 => {
            let v = format!("sk-proj-{}", r.s(ALNUM, 60));
            sec(
                format!("export OPENAI_API_KEY={v}"),
                "openai-project-key",
                &v,
            )
        }
        10 => (
            format!(
                "cd /home/zed/src/app && git log --author='Zed Quimby' # {}",
                r.s(HEX, 7)
            ),
            "author-name",
            vec![("identity", "Zed Quimby".to_string())],
        ),
        _ => sec(format!("password: {pw}"), "prose-password", &pw),
    }
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("string")
}

/// About `target` bytes of varied transcript JSONL.
pub fn generate_varied(seed: u64, target: usize) -> String {
    generate_varied_with_truth(seed, target).0
}

/// [`generate_varied`] and the values planted in its leak lines (one
/// [`Truth`] per value, `line` 1-based), for scoring a scanner on it: the
/// same bytes for the same seed.
pub fn generate_varied_with_truth(seed: u64, target: usize) -> (String, Vec<Truth>) {
    let mut r = Rng::new(seed ^ 0x005e_ed0f_7a41);
    let mut out = String::with_capacity(target + 4096);
    let mut truth = Vec::new();
    let mut n = 0usize;
    while out.len() < target {
        n += 1;
        let u = format!("{}-{}", r.s(HEX, 8), r.s(HEX, 12));
        let env = format!(
            r#""sessionId":"a1b2c3d4-0000-4000-8000-00000000000{}","cwd":"/home/zed/src/app","uuid":"{u}","timestamp":"2026-02-0{}T09:{:02}:00.000Z""#,
            r.below(10),
            1 + r.below(9),
            r.below(60)
        );
        let pick = r.below(100);
        let text = if pick < 10 {
            // Non-ASCII prose, one to three sentences.
            let mut s = String::new();
            for _ in 0..1 + r.below(3) {
                s.push_str(r.pick(PROSE));
                s.push(' ');
            }
            s
        } else if pick < 30 {
            r.pick(ASCII_PROSE).to_string()
        } else if pick < 45 {
            config(&mut r, n)
        } else if pick < 60 {
            code(&mut r, n)
        } else if pick < 70 {
            let (text, kind, values) = leak(&mut r, n);
            truth.extend(values.into_iter().map(|(class, value)| Truth {
                kind: kind.to_string(),
                class: class.to_string(),
                value,
                decoy: false,
                line: n,
            }));
            text
        } else if pick < 85 {
            format!(
                "$ git status\nOn branch main\nmodified:   src/{}.rs\n$ cargo test\ntest result: ok. {} passed\n",
                r.s("abcdefghij", 6),
                r.below(300)
            )
        } else {
            // Short lines: a path, a hash, a number.
            format!(
                "/home/zed/src/app/src/{}.rs:{}",
                r.s("abcdefgh", 5),
                r.below(900)
            )
        };
        let line = match r.below(3) {
            0 => format!(
                r#"{{"type":"user",{env},"message":{{"role":"user","content":{}}}}}"#,
                json_str(&text)
            ),
            1 => format!(
                r#"{{"type":"user",{env},"message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"toolu_{}","content":{}}}]}}}}"#,
                r.s(ALNUM, 24),
                json_str(&text)
            ),
            _ => format!(
                r#"{{"type":"assistant",{env},"message":{{"role":"assistant","content":[{{"type":"text","text":{}}}],"usage":{{"input_tokens":{},"output_tokens":{}}}}}}}"#,
                json_str(&text),
                r.below(9000),
                r.below(900)
            ),
        };
        out.push_str(&line);
        out.push('\n');
    }
    (out, truth)
}

/// Share of lines holding a non-ASCII byte.
pub fn non_ascii_line_share(corpus: &str) -> f64 {
    let (mut all, mut non) = (0usize, 0usize);
    for l in corpus.lines() {
        all += 1;
        if !l.is_ascii() {
            non += 1;
        }
    }
    non as f64 / all.max(1) as f64
}
