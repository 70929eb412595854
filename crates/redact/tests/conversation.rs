//! Secret-reading commands (issue 10): the output of `pass show`, `op read`,
//! `vault kv get`, `cat ~/.pgpass`, … is a bare string no rule knows by
//! shape. A `tool_result` whose `tool_use` (matched by `tool_use_id`, in the
//! same transcript) ran one has its secret-shaped words redacted; the same
//! output answering another command is left alone.

mod common;
use common::*;

fn tool_use(id: &str, command: &str) -> String {
    serde_json::json!({
        "type": "assistant",
        "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": id, "name": "Bash",
             "input": {"command": command, "description": "read it"}}
        ]}
    })
    .to_string()
}

fn read_use(id: &str, path: &str) -> String {
    serde_json::json!({
        "type": "assistant",
        "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": id, "name": "Read", "input": {"file_path": path}}
        ]}
    })
    .to_string()
}

/// Claude Code writes the output twice: in the `tool_result` and in
/// `toolUseResult.stdout`.
fn tool_result(id: &str, output: &str) -> String {
    serde_json::json!({
        "type": "user",
        "message": {"role": "user", "content": [
            {"tool_use_id": id, "type": "tool_result", "content": output, "is_error": false}
        ]},
        "toolUseResult": {"stdout": output, "stderr": "", "interrupted": false}
    })
    .to_string()
}

fn tool_result_parts(id: &str, output: &str) -> String {
    serde_json::json!({
        "type": "user",
        "message": {"role": "user", "content": [
            {"tool_use_id": id, "type": "tool_result",
             "content": [{"type": "text", "text": output}]}
        ]}
    })
    .to_string()
}

fn transcript(lines: &[String]) -> String {
    let mut t = lines.join("\n");
    t.push('\n');
    t
}

/// Both entry points: the whole-text one capture uses, and the stream.
fn redacted(text: &str) -> Vec<String> {
    let s = scanner();
    let whole = s.redact(text).expect("not refused").text;
    let mut out = Vec::new();
    s.redact_stream(text.as_bytes(), &mut out)
        .expect("stream not refused");
    let stream = String::from_utf8(out).unwrap();
    for t in [&whole, &stream] {
        for l in t.lines() {
            serde_json::from_str::<serde_json::Value>(l).expect("still JSON");
        }
    }
    vec![whole, stream]
}

fn pwd(seed: u64) -> String {
    format!("{}{}", rs(seed, ALNUM, 14), seed % 89)
}

#[test]
fn outputs_of_secret_reading_commands_are_redacted() {
    let cases: Vec<(String, String, Vec<String>)> = vec![
        (
            "pass show infra/db".into(),
            format!("{}\n", pwd(1)),
            vec![pwd(1)],
        ),
        (
            "gopass show -o web/admin".into(),
            format!("{}\n", pwd(2)),
            vec![pwd(2)],
        ),
        (
            "pass show email/work".into(),
            format!("{}\nlogin: zed\nrecovery: {}\n", pwd(3), pwd(4)),
            vec![pwd(3), pwd(4)],
        ),
        (
            "op read 'op://Private/Geocoder/credential'".into(),
            pwd(5),
            vec![pwd(5)],
        ),
        (
            "vault kv get secret/app".into(),
            format!(
                "====== Data ======\nKey         Value\n---         -----\npassword    {}\nuser        app\n",
                pwd(6)
            ),
            vec![pwd(6)],
        ),
        (
            "aws secretsmanager get-secret-value --secret-id prod/db --query SecretString --output text"
                .into(),
            format!("{{\"username\":\"app\",\"password\":\"{}\"}}", pwd(7)),
            vec![pwd(7)],
        ),
        (
            "gcloud secrets versions access latest --secret=geo-key".into(),
            pwd(8),
            vec![pwd(8)],
        ),
        (
            "kubectl get secret db -o jsonpath='{.data.password}' | base64 -d".into(),
            pwd(9),
            vec![pwd(9)],
        ),
        (
            "security find-generic-password -s github -a zed -w".into(),
            format!("{}\n", pwd(10)),
            vec![pwd(10)],
        ),
        (
            "cat ~/.pgpass".into(),
            format!("db.example.com:5432:app:app:{}\n", pwd(11)),
            vec![pwd(11)],
        ),
        (
            format!("echo -n '{}' | base64", pwd(13)),
            "UmVkYWN0ZWRPbmNlQWdhaW4xMjM0NQ==\n".into(),
            vec![pwd(13), "UmVkYWN0ZWRPbmNlQWdhaW4xMjM0NQ==".into()],
        ),
        (
            format!("printf %s {} | base64 -w0", pwd(14)),
            "QW5vdGhlckVuY29kZWRWYWx1ZTk4Nw==".into(),
            vec![pwd(14), "QW5vdGhlckVuY29kZWRWYWx1ZTk4Nw==".into()],
        ),
        (
            "kubectl -n argocd get secret argocd-initial-admin-secret -o jsonpath=\"{.data.password}\" | base64 -d".into(),
            pwd(15),
            vec![pwd(15)],
        ),
        (
            "argocd admin initial-password -n argocd".into(),
            format!("{}\n\n This password must be only used for first time login.\n", pwd(16)),
            vec![pwd(16)],
        ),
        (
            "kubectl --context prod get secret db -o yaml".into(),
            format!("apiVersion: v1\ndata:\n  password: {}\nkind: Secret\n", pwd(17)),
            vec![pwd(17)],
        ),
        (
            "bin/elasticsearch-reset-password -u elastic".into(),
            format!("Password for the [elastic] user successfully reset.\nNew value: {}\n", pwd(18)),
            vec![pwd(18)],
        ),
        (
            "cat config/master.key".into(),
            format!("{}\n", rs(19, HEX, 32)),
            vec![rs(19, HEX, 32)],
        ),
        (
            "docker exec db cat /run/secrets/db_password".into(),
            format!("{}\n", pwd(21)),
            vec![pwd(21)],
        ),
        (
            "cat ~/.vault-token".into(),
            format!("hvs.{}", rs(22, ALNUM, 24)),
            vec![rs(22, ALNUM, 24)],
        ),
        (
            "bw get password github.com".into(),
            format!("{}\n", pwd(23)),
            vec![pwd(23)],
        ),
        (
            "lpass show --password work/db".into(),
            format!("{}\n", pwd(24)),
            vec![pwd(24)],
        ),
        (
            "/opt/homebrew/bin/op read op://Private/db/password".into(),
            pwd(26),
            vec![pwd(26)],
        ),
        (
            "op signin --account my --raw".into(),
            format!("{}\n", pwd(25)),
            vec![pwd(25)],
        ),
        (
            "cd api && cat .env".into(),
            format!("PORT=8080\nGEOCODER={}\nDEBUG=true\n", pwd(12)),
            vec![pwd(12)],
        ),
        // Infrastructure tools' outputs named like a secret.
        (
            "terraform output -raw db_password".into(),
            pwd(27),
            vec![pwd(27)],
        ),
        (
            "terraform -chdir=infra output -json admin-api-key".into(),
            format!("\"{}\"\n", pwd(28)),
            vec![pwd(28)],
        ),
        (
            "terraform output grafana_admin_pass".into(),
            format!("\"{}\"\n", pwd(29)),
            vec![pwd(29)],
        ),
        (
            "pulumi config get geo:apiToken".into(),
            format!("{}\n", pwd(30)),
            vec![pwd(30)],
        ),
        (
            "pulumi stack output dbPassword --show-secrets".into(),
            format!("{}\n", pwd(31)),
            vec![pwd(31)],
        ),
        (
            "pulumi stack output --show-secrets".into(),
            format!(
                "Current stack outputs (2):\n    OUTPUT    VALUE\n    url       https://geo.example.com\n    geocoder  {}\n",
                pwd(32)
            ),
            vec![pwd(32)],
        ),
        (
            "aws ecr get-login-password --region eu-west-1".into(),
            format!("eyJwYXlsb2FkIjoi{}\n", rs(33, B64, 1200)),
            vec![rs(33, B64, 1200)],
        ),
        // Decrypted files, and config stores listed whole.
        (
            "sops -d secrets.enc.yaml".into(),
            format!("db:\n  host: db.internal\n  geocoder: {}\n", pwd(34)),
            vec![pwd(34)],
        ),
        (
            "sops decrypt --output-type json config/prod.enc.json".into(),
            format!("{{\"geocoder\": \"{}\"}}", pwd(35)),
            vec![pwd(35)],
        ),
        (
            "ansible-vault view group_vars/all/vault.yml".into(),
            format!("vault_geocoder: {}\n", pwd(36)),
            vec![pwd(36)],
        ),
        (
            "gpg --quiet --decrypt backup-codes.asc".into(),
            format!("{}\n{}\n", pwd(37), pwd(38)),
            vec![pwd(37), pwd(38)],
        ),
        (
            "age -d -i ~/.age/key.txt secrets.age".into(),
            format!("geo={}\n", pwd(39)),
            vec![pwd(39)],
        ),
        (
            "heroku config -a geo-api".into(),
            format!("=== geo-api Config Vars\nGEOCODER:     {}\nPORT:         8080\n", pwd(40)),
            vec![pwd(40)],
        ),
        (
            "railway variables --kv".into(),
            format!("GEOCODER={}\n", pwd(41)),
            vec![pwd(41)],
        ),
        (
            "infisical export --env=prod".into(),
            format!("GEOCODER='{}'\n", pwd(42)),
            vec![pwd(42)],
        ),
        (
            "chamber read geo-api geocoder".into(),
            format!("Key         Value             Version\ngeocoder    {}  1\n", pwd(43)),
            vec![pwd(43)],
        ),
    ];
    for (i, (cmd, output, secrets)) in cases.iter().enumerate() {
        let id = format!("toolu_01Case{i}");
        let text = transcript(&[tool_use(&id, cmd), tool_result(&id, output)]);
        for out in redacted(&text) {
            for s in secrets {
                assert!(!out.contains(s.as_str()), "{cmd}: {s} survived:\n{out}");
            }
        }
        // The array form of `content`.
        let text = transcript(&[tool_use(&id, cmd), tool_result_parts(&id, output)]);
        for out in redacted(&text) {
            for s in secrets {
                assert!(!out.contains(s.as_str()), "{cmd} (parts): {s} survived");
            }
        }
    }
}

#[test]
fn a_read_of_a_secret_file_is_a_secret_reading_command() {
    let id = "toolu_01ReadEnv";
    let text = transcript(&[
        read_use(id, "/home/zed/app/.env.production"),
        tool_result(
            id,
            &format!("     1\u{2192}STRIPE={}\n     2\u{2192}PORT=80\n", pwd(20)),
        ),
    ]);
    for out in redacted(&text) {
        assert!(!out.contains(&pwd(20)), "{out}");
    }
}

#[test]
fn the_link_is_the_tool_use_id() {
    let out_text = format!("{}\n", pwd(30));
    // The same output answering an ordinary command, or answering no
    // marked id, is kept: nothing about it alone says secret.
    for text in [
        transcript(&[
            tool_use("toolu_01A", "git rev-parse --short HEAD"),
            tool_result("toolu_01A", &out_text),
        ]),
        transcript(&[
            tool_use("toolu_01A", "pass show infra/db"),
            tool_result("toolu_01B", &out_text),
        ]),
        transcript(&[tool_result("toolu_01A", &out_text)]),
    ] {
        for out in redacted(&text) {
            assert!(out.contains(&pwd(30)), "redacted without a link:\n{out}");
        }
    }
    // A later mention of the secret, anywhere, is redacted too.
    let text = transcript(&[
        tool_use("toolu_01C", "pass show infra/db"),
        tool_result("toolu_01C", &out_text),
        tool_use("toolu_01D", &format!("psql -W {}", pwd(30))),
    ]);
    for out in redacted(&text) {
        assert!(!out.contains(&pwd(30)), "{out}");
    }
}

#[test]
fn messages_and_ordinary_words_are_kept() {
    let text = transcript(&[
        tool_use("toolu_01E", "pass show -c web/login"),
        tool_result(
            "toolu_01E",
            "Copied web/login to clipboard. Will clear in 45 seconds.",
        ),
        tool_use("toolu_01F", "pass show missing/entry"),
        tool_result(
            "toolu_01F",
            "Error: missing/entry is not in the password store.",
        ),
        // Encoding a word that is not a credential.
        tool_use("toolu_01H", "echo -n hello | base64"),
        tool_result("toolu_01H", "aGVsbG8gd29ybGQgYWdhaW4=\n"),
        tool_use("toolu_01G", "cat .env"),
        tool_result("toolu_01G", "PORT=8080\nDEBUG=true\nLOG_LEVEL=info\n"),
    ]);
    for out in redacted(&text) {
        assert!(!out.contains("[REDACTED"), "{out}");
    }
}

/// Commands that generate a secret (its output is about to become one) or
/// print one from a variable, a keyring or a credentials file (issue 10,
/// session 21's probe lists 11 and 12).
#[test]
fn outputs_of_secret_generating_and_printing_commands_are_redacted() {
    let hex = |n| rs(n, HEX, 64);
    let b64k = |n| format!("{}=", rs(n, B64, 43));
    let cases: Vec<(&str, String)> = vec![
        ("openssl rand -hex 32", hex(40)),
        (
            "python3 -c \"import secrets; print(secrets.token_hex(32))\"",
            hex(41),
        ),
        (
            "python -c 'import secrets; print(secrets.token_urlsafe(32))'",
            rs(42, URLSAFE, 43),
        ),
        (
            "python3 -c 'import os,base64; print(base64.b64encode(os.urandom(32)).decode())'",
            b64k(43),
        ),
        (
            "node -e \"console.log(require('crypto').randomBytes(32).toString('hex'))\"",
            hex(44),
        ),
        (
            "ruby -rsecurerandom -e 'puts SecureRandom.hex(32)'",
            hex(45),
        ),
        ("head -c 32 /dev/urandom | base64", b64k(46)),
        (
            "tr -dc A-Za-z0-9 </dev/urandom | head -c 24; echo",
            rs(47, ALNUM, 24),
        ),
        (
            "dd if=/dev/urandom bs=32 count=1 2>/dev/null | base64",
            b64k(48),
        ),
        ("wg genkey", b64k(49)),
        ("umask 077 && wg genkey | tee privatekey", b64k(50)),
        ("bin/rails secret", rs(51, HEX, 128)),
        ("mix phx.gen.secret 64", rs(52, ALNUM, 64)),
        (
            "php artisan key:generate --show",
            format!("base64:{}", b64k(53)),
        ),
        ("gpg --gen-random --armor 1 32", b64k(54)),
        ("printenv API_TOKEN", rs(55, ALNUM, 32)),
        ("echo $DB_PASSWORD", pwd(56)),
        ("echo \"${POSTGRES_PASSWORD}\"", pwd(57)),
        ("ssh prod 'echo $DB_PASS'", pwd(58)),
        (
            "docker compose exec web printenv DJANGO_SECRET_KEY",
            rs(59, ALNUM, 50),
        ),
        (
            "kubectl exec deploy/api -- printenv STRIPE_API_KEY",
            rs(60, ALNUM, 32),
        ),
        (
            "fly ssh console -C \"printenv API_TOKEN\"",
            rs(61, ALNUM, 32),
        ),
        ("keyring get smtp bob", pwd(62)),
        ("secret-tool lookup service smtp user bob", pwd(63)),
        ("systemd-ask-password \"Disk passphrase:\"", pwd(64)),
        (
            "jq -r .token ~/.config/app/credentials.json",
            rs(65, ALNUM, 32),
        ),
        ("jq -r '.api_key' config.json", rs(66, ALNUM, 32)),
        (
            "bitcoin-cli -testnet dumpprivkey tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx",
            format!(
                "c{}",
                rs(
                    67,
                    "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz",
                    51
                )
            ),
        ),
        (
            "cat ~/.config/solana/id.json",
            format!(
                "[{}]",
                rs(68, "123456789", 64)
                    .bytes()
                    .zip(rs(69, "0123456789", 64).bytes())
                    .map(|(a, b)| format!("{}{}", a as char, b as char))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        ),
    ];
    for (i, (cmd, secret)) in cases.iter().enumerate() {
        let id = format!("toolu_01Gen{i}");
        let text = transcript(&[tool_use(&id, cmd), tool_result(&id, &format!("{secret}\n"))]);
        for out in redacted(&text) {
            assert!(!out.contains(secret.as_str()), "{cmd}: survived:\n{out}");
        }
    }
    // Credentials files read whole: their secret-shaped words.
    for (i, (path, content, secret)) in [
        (
            "~/.config/hub",
            format!(
                "github.com:\n- user: bob\n  oauth_token: {}\n  protocol: https\n",
                rs(70, ALNUM, 32)
            ),
            rs(70, ALNUM, 32),
        ),
        (
            "~/.config/gcloud/application_default_credentials.json",
            format!(
                "{{\"client_id\": \"x\", \"refresh_token\": \"1//{}\"}}",
                rs(71, URLSAFE, 60)
            ),
            rs(71, URLSAFE, 60),
        ),
        (
            "~/.docker/config.json",
            format!(
                "{{\"auths\": {{\"ghcr.io\": {{\"auth\": \"{}\"}}}}}}",
                rs(72, B64, 40)
            ),
            rs(72, B64, 40),
        ),
    ]
    .iter()
    .enumerate()
    {
        let id = format!("toolu_01File{i}");
        let text = transcript(&[
            tool_use(&id, &format!("cat {path}")),
            tool_result(&id, content),
        ]);
        for out in redacted(&text) {
            assert!(!out.contains(secret.as_str()), "{path}: survived:\n{out}");
        }
    }
}

/// The near misses: a variable that is not a secret or names a thing about
/// one, a `jq` field that is not one, a script that generates nothing, a
/// search for the generators' names. Each output would be redacted whole
/// if its command were taken as secret-printing.
#[test]
fn commands_that_print_no_secret_are_kept() {
    for (i, (cmd, output)) in [
        ("echo $HOME", "/home/zed"),
        ("printenv PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("echo $PWD", "/home/zed/src/app"),
        ("echo $TOKEN_FILE", "/run/secrets/api_token"),
        ("printenv AUTH_URL", "https://auth.corp.io/oauth2/token"),
        ("echo $SECRET_NAME", "prod/api/stripe-live"),
        ("jq -r .name package.json", "my-web-app-2026"),
        ("python3 -c 'print(sum(range(10)))'", "45"),
        (
            "python3 scripts/token_report.py",
            "tokens used today 12345 of 50000",
        ),
        (
            "grep -rn randomBytes src/ | head -1",
            "src/auth/nonce.ts:12:  return crypto.randomBytes(16).toString('hex');",
        ),
        (
            "cat README.md",
            "Set up: copy .env.example to .env and run make",
        ),
        ("bitcoin-cli -regtest getblockcount", "1024"),
        (
            "cat ~/.config/solana/cli/config.yml",
            "json_rpc_url: https://api.devnet.solana.com",
        ),
        // Outputs not named like a secret, or named for a reference to one.
        ("terraform output -raw bucket_name", "acme-prod-assets-2026"),
        (
            "terraform output -raw api_token_ssm_path",
            "/prod/geo-api/api-token-v2",
        ),
        ("pulumi config get aws:region", "eu-west-1"),
        // The password went into the pipe, not the output.
        (
            "aws ecr get-login-password --region eu-west-1 | docker login --username AWS --password-stdin 123456789012.dkr.ecr.eu-west-1.amazonaws.com",
            "Login Succeeded",
        ),
        (
            "heroku config:set GEO_REGION=eu -a geo-api",
            "Setting GEO_REGION and restarting geo-api... done, v42",
        ),
        (
            "gpg --list-keys bob",
            "pub   ed25519 2026-01-01 [SC]\n      3AA5C34371567BD2A9F1\nuid   bob",
        ),
        ("sops --encrypt --in-place secrets.yaml", ""),
        ("age-keygen -y key.txt", "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"),
    ]
    .iter()
    .enumerate()
    {
        let id = format!("toolu_01Keep{i}");
        let text = transcript(&[tool_use(&id, cmd), tool_result(&id, output)]);
        for out in redacted(&text) {
            assert!(!out.contains("[REDACTED"), "{cmd}: {out}");
        }
    }
}
