//! Transcript habits (issue 10): secrets typed the way people type them in
//! prompts, shell commands and config dumps. Each class is a table of
//! spellings; every spelling is tried bare and inside a JSON `tool_result`
//! line, and the secret must be gone with the output still JSON.

mod common;
use common::*;

/// (class, text, secret) — the secret must not survive.
fn check(cases: &[(&str, String, String)]) {
    let s = scanner();
    let mut failures = Vec::new();
    for (class, text, secret) in cases {
        assert!(text.contains(secret.as_str()), "{class}: bad case");
        for (ctx, input) in [("plain", text.clone()), ("json", json_line(text))] {
            let r = match s.redact(&input) {
                Ok(r) => r,
                Err(e) => {
                    failures.push(format!("{class} / {ctx}: refused: {e}"));
                    continue;
                }
            };
            if r.text.contains(secret.as_str())
                || r.text.contains(json_string(secret).trim_matches('"'))
            {
                failures.push(format!("{class} / {ctx}: survived: {}", r.text));
            }
            if ctx == "json" && serde_json::from_str::<serde_json::Value>(&r.text).is_err() {
                failures.push(format!("{class} / {ctx}: not JSON: {}", r.text));
            }
            if s.redact(&r.text).map(|a| a.text).ok().as_deref() != Some(r.text.as_str()) {
                failures.push(format!("{class} / {ctx}: not idempotent"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn pw(seed: u64) -> String {
    format!("{}{}#", rs(seed, ALNUM, 9), seed % 97)
}

const WORDS: &[&str] = &[
    "abandon", "ability", "orbit", "velvet", "garden", "sugar", "cable", "tunnel", "wisdom",
    "pepper", "anchor", "frost", "mango", "ripple", "canvas", "dune", "ember", "lunar", "quartz",
    "timber", "harbor", "violet", "saddle", "copper",
];

/// `n` words drawn from a BIP-39-like list (seeded), joined by spaces.
fn phrase(seed: u64, n: usize) -> String {
    rs(seed, "abcdefghijklmnopqrstuvwx", n)
        .bytes()
        .map(|b| WORDS[usize::from(b - b'a')])
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn aws_cli_and_prose_key_pairs() {
    let sec = |n| rs(n, B64, 40);
    let id = |n| format!("AKIA{}", rs(n, UPPER_NUM, 16));
    check(&[
        (
            "aws configure",
            format!("aws configure set aws_secret_access_key {}", sec(1)),
            sec(1),
        ),
        (
            "aws configure",
            format!(
                "$ aws configure set profile.prod.aws_secret_access_key '{}'",
                sec(2)
            ),
            sec(2),
        ),
        (
            "aws configure",
            format!("aws configure set aws_session_token {}{}", sec(3), sec(4)),
            sec(3),
        ),
        (
            "aws prose",
            format!("aws creds: {} / {}", id(5), sec(5)),
            sec(5),
        ),
        (
            "aws prose",
            format!("key {} secret {} region eu-west-1", id(6), sec(6)),
            sec(6),
        ),
        ("aws prose", format!("{},{}", id(7), sec(7)), sec(7)),
        (
            "aws prose",
            format!(
                "my aws key is {} and the secret is {} (prod account)",
                id(8),
                sec(8)
            ),
            sec(8),
        ),
    ]);
}

#[test]
fn command_line_passwords() {
    check(&[
        (
            "cmdkey",
            format!("cmdkey /add:files.corp.local /user:CORP\\bob /pass:{}", pw(80)),
            pw(80),
        ),
        (
            "schtasks",
            format!(
                "schtasks /Create /TN nightly /TR C:\\jobs\\sync.exe /SC DAILY /RU CORP\\svc /RP \"{}\"",
                pw(81)
            ),
            pw(81),
        ),
        (
            "docker login",
            format!("docker login -u bob -p {}", pw(10)),
            pw(10),
        ),
        (
            "docker login",
            format!(
                "docker login registry.example.com --username bob -p '{}'",
                pw(11)
            ),
            pw(11),
        ),
        (
            "docker login",
            format!("podman login -u bob --password={} quay.io", pw(12)),
            pw(12),
        ),
        (
            "docker login",
            format!("helm registry login ghcr.io -u bob -p {}", pw(13)),
            pw(13),
        ),
        (
            "curl -u",
            format!("curl -u bob:{} https://api.example.com/v1", pw(14)),
            pw(14),
        ),
        (
            "curl -u",
            format!(
                "curl -s --user 'deploy:{}' -X POST https://ci.example.com",
                pw(15)
            ),
            pw(15),
        ),
        (
            "curl -u",
            format!("curl -fsSL -ubob:{} https://x.example.com", pw(16)),
            pw(16),
        ),
        (
            "curl -u",
            format!("http -a alice:{} GET api.example.com/me", pw(17)),
            pw(17),
        ),
        (
            "sshpass",
            format!("sshpass -p {} ssh deploy@host", pw(18)),
            pw(18),
        ),
        (
            "sshpass",
            format!("sshpass -p'{}' scp a host:b", pw(19)),
            pw(19),
        ),
        (
            "sshpass",
            format!("sshpass -p \"{}\" rsync -a x host:y", pw(20)),
            pw(20),
        ),
        // Quoted passwords may hold the shell's metacharacters.
        (
            "sshpass",
            format!("sshpass -p '{}&3x' ssh bob@host", pw(21)),
            format!("{}&3x", pw(21)),
        ),
        (
            "sshpass",
            format!("sshpass -p \"{};(k)|\" ssh bob@host", pw(22)),
            format!("{};(k)|", pw(22)),
        ),
    ]);
}

#[test]
fn secrets_named_in_prose() {
    let v = |n| rs(n, ALNUM, 28);
    let h = |n| rs(n, HEX, 32);
    check(&[
        ("prose", format!("client_secret {}", v(30)), v(30)),
        ("prose", format!("the client secret is {}", v(31)), v(31)),
        ("prose", format!("api key: {}", h(32)), h(32)),
        (
            "prose",
            format!("api key for the geocoder: {}", h(33)),
            h(33),
        ),
        (
            "prose",
            format!("here is my API key {} use it", v(34)),
            v(34),
        ),
        ("prose", format!("access token = {}", v(35)), v(35)),
        ("prose", format!("the api secret is {}", v(36)), v(36)),
        ("prose", format!("token for staging: {}", h(37)), h(37)),
        (
            "prose",
            format!("The secret of the CI job is {}", v(38)),
            v(38),
        ),
        (
            "prose",
            format!("then set the secret to {} and redeploy", v(39)),
            v(39),
        ),
        (
            "login slash",
            "login zed is admin / Winter1998#".to_string(),
            "Winter1998#".to_string(),
        ),
        (
            "login slash",
            "the login for staging is root / Dragon2023!".to_string(),
            "Dragon2023!".to_string(),
        ),
        (
            "login slash",
            "user: deploy / s3cretPass99".to_string(),
            "s3cretPass99".to_string(),
        ),
        (
            "login slash",
            "creds = ops@example.org / Tr0ub4dor&3".to_string(),
            "Tr0ub4dor&3".to_string(),
        ),
        (
            "password in prose",
            "the password for the db is Spring2023$".to_string(),
            "Spring2023$".to_string(),
        ),
        (
            "password in prose",
            "use this password: Autumn2024! for now.".to_string(),
            "Autumn2024!".to_string(),
        ),
        (
            "password in prose",
            "my staging passphrase is now b4ttery-Stapl3.".to_string(),
            "b4ttery-Stapl3".to_string(),
        ),
        (
            "password in prose",
            "pw for the router: Ky7#mqz9".to_string(),
            "Ky7#mqz9".to_string(),
        ),
        (
            "user pass words",
            "user admin pass Fall2021pw".to_string(),
            "Fall2021pw".to_string(),
        ),
        (
            "user pass words",
            "login: zed, pw: Qm4!rt8x".to_string(),
            "Qm4!rt8x".to_string(),
        ),
    ]);
}

#[test]
fn netrc_lines() {
    let h = |n| rs(n, HEX, 32);
    check(&[
        (
            "netrc",
            format!(
                "machine api.heroku.com\n  login zed@example.org\n  password {}\n",
                h(40)
            ),
            h(40),
        ),
        (
            "netrc",
            format!(
                "machine git.heroku.com login zed@example.org password {}",
                h(41)
            ),
            h(41),
        ),
        (
            "netrc",
            format!("machine ftp.example.com password {}", pw(42)),
            pw(42),
        ),
        (
            "netrc",
            format!("default login anonymous password {}", pw(43)),
            pw(43),
        ),
    ]);
}

#[test]
fn env_and_framework_keys() {
    let dj = format!("{}(%!@#&){}", rs(50, ALNUM, 12), rs(51, ALNUM, 20));
    let tail = rs(51, ALNUM, 20);
    let app = rs(52, B64, 43) + "=";
    check(&[
        ("pepper", format!("PASSWORD_PEPPER={}", pw(82)), pw(82)),
        (
            "pepper",
            format!("export PEPPER={}", rs(83, HEX, 32)),
            rs(83, HEX, 32),
        ),
        ("django", format!("SECRET_KEY={dj}"), tail.clone()),
        (
            "django",
            format!("export DJANGO_SECRET_KEY={dj}\nDEBUG=False"),
            tail.clone(),
        ),
        (
            "django",
            format!("DEBUG=0\nSECRET_KEY={dj}\nALLOWED_HOSTS=*"),
            dj.clone(),
        ),
        (
            "django",
            format!("DB_PASSWORD={}&x(y)", rs(53, ALNUM, 10)),
            "&x(y)".to_string(),
        ),
        ("laravel", format!("APP_KEY=base64:{app}"), app.clone()),
        ("laravel", format!("APP_KEY=\"base64:{app}\""), app.clone()),
        ("laravel", format!("'key' => 'base64:{app}',"), app.clone()),
        (
            "laravel",
            format!("ENCRYPTION_KEY: base64:{app}"),
            app.clone(),
        ),
    ]);
}

#[test]
fn byte_string_constants() {
    let v = |n| rs(n, ALNUM, 32);
    check(&[
        (
            "rust b\"\"",
            format!("const WEBHOOK_SECRET: &[u8] = b\"{}\";", v(60)),
            v(60),
        ),
        (
            "rust b\"\"",
            format!("pub static API_TOKEN: &'static [u8] = b\"{}\";", v(61)),
            v(61),
        ),
        (
            "rust b\"\"",
            format!("const SIGNING_KEY: &[u8; 32] = b\"{}\";", v(62)),
            v(62),
        ),
        (
            "rust str",
            format!("const DB_PASSWORD: &str = \"{}\";", v(63)),
            v(63),
        ),
        (
            "python bytes",
            format!("HMAC_KEY: bytes = b\"{}\"", v(64)),
            v(64),
        ),
    ]);
}

#[test]
fn base64_of_secret_text() {
    let body: String = (0..8).map(|i| rs(70 + i, B64, 64) + "\n").collect();
    let pem = b64(&format!(
        "-----BEGIN RSA PRIVATE KEY-----\n{body}-----END RSA PRIVATE KEY-----\n"
    ));
    let ec = b64(&format!(
        "-----BEGIN EC PRIVATE KEY-----\n{body}-----END EC PRIVATE KEY-----\n"
    ));
    let env = b64(&format!(
        "DATABASE_URL=postgres://db/app\nSTRIPE_SECRET={}\nDEBUG=0\n",
        rs(80, ALNUM, 30)
    ));
    let json = b64(&format!(
        "{{\"username\":\"svc\",\"password\":\"{}\"}}",
        pw(81)
    ));
    check(&[
        (
            "kubeconfig",
            format!("    client-key-data: {pem}"),
            pem[20..60].to_string(),
        ),
        (
            "secret data",
            format!("data:\n  tls.key: {ec}\n"),
            ec[20..60].to_string(),
        ),
        (
            "env dump",
            format!("echo {env} | base64 -d > .env"),
            env.clone(),
        ),
        ("env dump", format!("data: {{.env: {env}}}"), env.clone()),
        (
            "json",
            format!("  \"config.json\": \"{json}\""),
            json.clone(),
        ),
    ]);
}

#[test]
fn password_hashes() {
    let salt = rs(
        90,
        "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        16,
    );
    let h86 = rs(
        91,
        "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        86,
    );
    let h22 = rs(
        92,
        "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        22,
    );
    let h53 = rs(
        93,
        "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        53,
    );
    check(&[
        (
            "shadow",
            format!("root:$6${salt}${h86}:19000:0:99999:7:::"),
            h86.clone(),
        ),
        (
            "shadow",
            format!("zed:$6$rounds=5000${salt}${h86}:19000::"),
            h86.clone(),
        ),
        (
            "htpasswd",
            format!("bob:$apr1${}${h22}", &salt[..8]),
            h22.clone(),
        ),
        ("htpasswd", format!("bob:$2y$10${h53}"), h53.clone()),
        (
            "bcrypt",
            format!("\"password_hash\": \"$2b$12${h53}\""),
            h53.clone(),
        ),
    ]);
}

/// Clients that take the password of their `-u` user on the command line:
/// cloud CLIs' `login`, MongoDB's tools, remote-shell and SMB tools,
/// SQL Server's `-P`, FreeRDP's `/p:`, Samba's `-U user%PW`, and Windows'
/// `net user` / `net use`.
#[test]
fn client_command_line_passwords() {
    let p = pw;
    check(&[
        (
            "az login",
            format!("az login -u bob@contoso.com -p {}", p(30)),
            p(30),
        ),
        (
            "oc login",
            format!(
                "oc login https://api.crc.testing:6443 -u dev -p '{}'",
                p(31)
            ),
            p(31),
        ),
        (
            "cf login",
            format!(
                "cf login -a https://api.example.com -u bob --password {}",
                p(32)
            ),
            p(32),
        ),
        (
            "mongo",
            format!(
                "mongosh \"mongodb://db:27017\" -u admin -p {} --authenticationDatabase admin",
                p(33)
            ),
            p(33),
        ),
        (
            "mongo",
            format!("mongodump --host db -u root --password={} --out /b", p(34)),
            p(34),
        ),
        (
            "evil-winrm",
            format!("evil-winrm -i 10.0.0.5 -u Administrator -p '{}'", p(35)),
            p(35),
        ),
        (
            "crackmapexec",
            format!("crackmapexec smb 10.0.0.0/24 -u admin -p {}", p(36)),
            p(36),
        ),
        (
            "netexec",
            format!("nxc smb 10.0.0.5 -u admin -p {} --shares", p(37)),
            p(37),
        ),
        (
            "smbmap",
            format!("smbmap -H 10.0.0.5 -u admin -p {}", p(38)),
            p(38),
        ),
        (
            "rdesktop",
            format!("rdesktop -u bob -p {} 10.0.0.7", p(39)),
            p(39),
        ),
        (
            "sqlcmd",
            format!("sqlcmd -S localhost -U sa -P '{}' -Q \"SELECT 1\"", p(40)),
            p(40),
        ),
        ("sqlcmd", format!("sqlcmd -S db -U sa -P{}", p(41)), p(41)),
        (
            "bcp",
            format!("bcp dbo.t out t.dat -S db -U sa -P {} -c", p(42)),
            p(42),
        ),
        (
            "xfreerdp",
            format!("xfreerdp /v:10.0.0.7 /u:bob /p:{} /cert:ignore", p(43)),
            p(43),
        ),
        (
            "smbclient",
            format!("smbclient //10.0.0.5/share -U bob%{}", p(44)),
            p(44),
        ),
        ("net user", format!("net user bob {} /add", p(45)), p(45)),
        (
            "net use",
            format!("net use Z: \\\\fs\\share /user:CORP\\bob {}", p(46)),
            p(46),
        ),
        (
            "net use",
            format!("net use \\\\fs\\share {} /user:CORP\\bob", p(47)),
            p(47),
        ),
    ]);
}

/// Archive, key-store, SSH, LDAP, message-broker and database tools given a
/// password on the command line, and passwords piped into a command that
/// reads one on standard input.
#[test]
fn tool_and_stdin_passwords() {
    let p = pw;
    let keytool = format!(
        "keytool -genkeypair -keystore ks.jks -storepass {} -keypass {} -alias app",
        p(57),
        p(58)
    );
    let keygen = format!(
        "ssh-keygen -p -P {} -N {} -f ~/.ssh/id_ed25519",
        p(62),
        p(63)
    );
    check(&[
        ("zip", format!("zip -r -P {} out.zip dir/", p(50)), p(50)),
        ("unzip", format!("unzip -P '{}' backup.zip", p(51)), p(51)),
        (
            "7z",
            format!("7z a -p{} -mhe=on archive.7z dir", p(52)),
            p(52),
        ),
        ("7z", format!("7za x -p'{}' archive.7z", p(53)), p(53)),
        (
            "openssl pass:",
            format!(
                "openssl pkcs12 -export -in c.pem -inkey k.pem -passout pass:{} -out c.p12",
                p(54)
            ),
            p(54),
        ),
        (
            "openssl pass:",
            format!(
                "openssl rsa -in k.pem -passin 'pass:{}' -out plain.pem",
                p(55)
            ),
            p(55),
        ),
        (
            "openssl enc -k",
            format!(
                "openssl enc -aes-256-cbc -salt -k {} -in a -out a.enc",
                p(56)
            ),
            p(56),
        ),
        ("keytool", keytool.clone(), p(57)),
        ("keytool second flag", keytool, p(58)),
        (
            "keytool import",
            format!(
                "keytool -importkeystore -srcstorepass {} -deststorepass {}",
                p(59),
                p(60)
            ),
            p(60),
        ),
        (
            "jarsigner",
            format!(
                "jarsigner -keystore ks.jks -storepass \"{}\" app.jar me",
                p(61)
            ),
            p(61),
        ),
        ("ssh-keygen old", keygen.clone(), p(62)),
        ("ssh-keygen new", keygen, p(63)),
        (
            "ssh-keygen new",
            format!("ssh-keygen -t ed25519 -N '{}' -f deploy_key", p(64)),
            p(64),
        ),
        (
            "htpasswd",
            format!("htpasswd -b -c /etc/nginx/.htpasswd admin {}", p(65)),
            p(65),
        ),
        (
            "htpasswd",
            format!("htpasswd -nbB admin '{}' > .htpasswd", p(66)),
            p(66),
        ),
        (
            "mysqldump",
            format!("mysqldump -uroot -p{} shop > shop.sql", p(67)),
            p(67),
        ),
        (
            "mariadb",
            format!("mariadb-admin -u root -p'{}' status", p(68)),
            p(68),
        ),
        (
            "ldapsearch",
            format!(
                "ldapsearch -x -H ldap://dc1 -D \"cn=admin,dc=corp\" -w {} -b dc=corp",
                p(69)
            ),
            p(69),
        ),
        (
            "ldappasswd",
            format!("ldappasswd -x -D cn=bob,dc=corp -w {} -s {}", p(70), p(71)),
            p(71),
        ),
        (
            "rabbitmqctl",
            format!("rabbitmqctl add_user bob {}", p(72)),
            p(72),
        ),
        (
            "rabbitmqctl",
            format!("sudo rabbitmqctl change_password guest '{}'", p(73)),
            p(73),
        ),
        (
            "sqlplus",
            format!("sqlplus system/{}@//db:1521/ORCL", p(74)),
            p(74),
        ),
        ("rman", format!("rman target sys/{}@prod", p(75)), p(75)),
        (
            "expdp",
            format!("expdp userid=scott/{} schemas=scott dumpfile=s.dmp", p(76)),
            p(76),
        ),
        (
            "identified by",
            format!("CREATE USER 'app'@'%' IDENTIFIED BY '{}';", p(77)),
            p(77),
        ),
        (
            "identified by",
            format!(
                "ALTER USER root@localhost IDENTIFIED WITH mysql_native_password BY \"{}\";",
                p(78)
            ),
            p(78),
        ),
        (
            "identified by",
            format!(
                "create user app identified by {} quota unlimited on users;",
                p(79)
            ),
            p(79),
        ),
        (
            "sudo -S",
            format!("echo '{}' | sudo -S apt-get update", p(80)),
            p(80),
        ),
        (
            "--password-stdin",
            format!(
                "echo {} | docker login ghcr.io -u bob --password-stdin",
                p(81)
            ),
            p(81),
        ),
        (
            "chpasswd",
            format!("echo \"deploy:{}\" | sudo chpasswd", p(82)),
            p(82),
        ),
        (
            "passwd --stdin",
            format!("echo -n {} | passwd --stdin deploy", p(83)),
            p(83),
        ),
    ]);
}

/// A generated password or key with no digit is random letters in mixed
/// case; a code name in camel case is words. Under a secret's name the
/// first is a secret, the second a reference.
#[test]
fn mixed_case_letter_values_are_not_code_names() {
    let v = |n| rs(n, LETTERS, 14);
    let k = |n| rs(n, LETTERS, 32);
    check(&[
        ("password", format!("DB_PASSWORD={}", v(1)), v(1)),
        ("password", format!("password = \"{}\"", v(2)), v(2)),
        (
            "password",
            format!("spring.datasource.password={}", v(3)),
            v(3),
        ),
        (
            "password",
            format!("Server=db;Database=app;User Id=sa;Password={};", v(4)),
            v(4),
        ),
        ("htpasswd", format!("htpasswd -nb admin {}", v(5)), v(5)),
        ("api key", format!("API_KEY={}", k(6)), k(6)),
        ("api key", format!("\"client_secret\": \"{}\"", k(7)), k(7)),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "password = getPassword",
            "password = \"userPassword\"",
            "api_key = apiKeyFromEnvironment",
            "secret = \"SecretManagerServiceClient\"",
            "token: accessTokenValue",
        ],
    );
}

/// Code and config that name a secret in ways the plain `NAME = value`
/// shape misses: an index (`ENV["API_TOKEN"] = …`), Ruby's `||=` and C#'s
/// `??=`, a setting whose name and value are two fields (XML attributes,
/// a properties element, a Kubernetes `env` entry), a basic-auth pair in
/// code, a `pass` key, a raw `Authorization` value.
#[test]
fn secrets_in_indexed_and_two_field_settings() {
    let p = pw;
    let k = |n| rs(n, ALNUM, 32);
    check(&[
        ("index", format!("ENV[\"API_TOKEN\"] = \"{}\"", k(1)), k(1)),
        ("index", format!("os.environ[\"DB_PASSWORD\"] = \"{}\"", p(2)), p(2)),
        ("index", format!("process.env['API_KEY'] = '{}';", k(3)), k(3)),
        ("index", format!("$_ENV['DB_PASSWORD'] = '{}';", p(4)), p(4)),
        ("index", format!("settings[:secret_key] = \"{}\"", k(5)), k(5)),
        ("||=", format!("ENV[\"STRIPE_SECRET\"] ||= \"{}\"", k(6)), k(6)),
        ("??=", format!("apiKey ??= \"{}\";", k(7)), k(7)),
        (
            "xml attributes",
            format!("<add key=\"ApiKey\" value=\"{}\" />", k(8)),
            k(8),
        ),
        (
            "xml attributes",
            format!("<property name=\"password\" value=\"{}\"/>", p(9)),
            p(9),
        ),
        (
            "xml element",
            format!("<entry key=\"db.password\">{}</entry>", p(10)),
            p(10),
        ),
        (
            "xml element",
            format!(
                "<property name=\"hibernate.connection.password\">{}</property>",
                p(11)
            ),
            p(11),
        ),
        (
            "env entry",
            format!(
                "env:\n  - name: LOG_LEVEL\n    value: debug\n  - name: DB_PASSWORD\n    value: \"{}\"",
                p(12)
            ),
            p(12),
        ),
        (
            "env entry",
            format!("- name: GITHUB_TOKEN\n  value: {}", k(13)),
            k(13),
        ),
        (
            "basic-auth pair",
            format!("requests.get(url, auth=(\"bob\", \"{}\"))", p(14)),
            p(14),
        ),
        (
            "basic-auth pair",
            format!("s.auth = HTTPBasicAuth('bob', '{}')", p(15)),
            p(15),
        ),
        (
            "pass key",
            format!("auth: {{ user: \"bob@x.io\", pass: \"{}\" }}", p(16)),
            p(16),
        ),
        ("pass key", format!("{{\"user\":\"bob\",\"pass\":\"{}\"}}", p(17)), p(17)),
        (
            "authorization",
            format!("curl -H \"Authorization: {}\" https://api.example.com", k(18)),
            k(18),
        ),
        ("redis-cli", format!("redis-cli -h cache -a {} ping", p(19)), p(19)),
    ]);
}

/// Commands that store a secret take it as an argument, a here-string or
/// standard input; a tool's `config set NAME V` with a secret's name.
#[test]
fn secret_storing_commands() {
    let p = pw;
    let k = |n| rs(n, ALNUM, 32);
    check(&[
        (
            "gh secret set",
            format!("gh secret set NPM_TOKEN --body {}", k(30)),
            k(30),
        ),
        (
            "gh secret set",
            format!("gh secret set API_KEY -b\"{}\" --repo o/r", k(31)),
            k(31),
        ),
        (
            "secretsmanager",
            format!(
                "aws secretsmanager create-secret --name prod/db --secret-string '{}'",
                p(32)
            ),
            p(32),
        ),
        (
            "keyvault",
            format!(
                "az keyvault secret set --vault-name kv --name db --value {}",
                p(33)
            ),
            p(33),
        ),
        (
            "ssm SecureString",
            format!(
                "aws ssm put-parameter --name /app/db --value {} --type SecureString",
                p(34)
            ),
            p(34),
        ),
        (
            "ssm SecureString",
            format!(
                "aws ssm put-parameter --type SecureString --name /app/db --value {}",
                p(35)
            ),
            p(35),
        ),
        (
            "user-secrets",
            format!("dotnet user-secrets set \"Stripe:SecretKey\" \"{}\"", k(36)),
            k(36),
        ),
        (
            "encrypt_string",
            format!(
                "ansible-vault encrypt_string '{}' --name db_password",
                p(37)
            ),
            p(37),
        ),
        (
            "here-string",
            format!("gcloud secrets create db --data-file=- <<< {}", p(38)),
            p(38),
        ),
        (
            "here-string",
            format!("vercel env add API_KEY production <<< \"{}\"", k(39)),
            k(39),
        ),
        (
            "stdin",
            format!(
                "printf \"%s\" \"{}\" | docker secret create db_password -",
                p(40)
            ),
            p(40),
        ),
        (
            "stdin",
            format!("echo -n {} | wrangler secret put API_TOKEN", k(41)),
            k(41),
        ),
        (
            "config set",
            format!("wp config set DB_PASSWORD {}", p(42)),
            p(42),
        ),
        (
            "config set",
            format!("git config --global github.token {}", k(43)),
            k(43),
        ),
        (
            "config set",
            format!("composer config --global github-oauth.github.com {}", k(44)),
            k(44),
        ),
        (
            "secretsmanager JSON",
            format!(
                "aws secretsmanager put-secret-value --secret-id geo --secret-string '{{\"key\":\"{}\"}}'",
                p(45)
            ),
            p(45),
        ),
        (
            "secretsmanager JSON",
            format!(
                "aws secretsmanager create-secret --name geo --secret-string \"{{\\\"geocoder\\\":\\\"{}\\\"}}\"",
                p(46)
            ),
            p(46),
        ),
        (
            "from-literal",
            format!(
                "kubectl create secret generic geo --from-literal=key={} --from-literal=region=eu",
                p(47)
            ),
            p(47),
        ),
        (
            "from-literal",
            format!(
                "kubectl -n prod create secret generic geo --from-literal=user=geo --from-literal='key={}'",
                p(48)
            ),
            p(48),
        ),
        (
            "secrets set",
            format!("fly secrets set -a geo-api GEOCODER={} REGION=eu", p(49)),
            p(49),
        ),
        (
            "secrets set",
            format!("flyctl secrets set REGION=eu GEOCODER=\"{}\" --stage", p(50)),
            p(50),
        ),
        (
            "secrets set",
            format!("supabase secrets set GEOCODER={}", k(51)),
            k(51),
        ),
    ]);
    // Reading or removing a secret, or a value from a file, sets none.
    assert_no_findings(
        &scanner(),
        [
            "kubectl create secret generic geo --from-file=key=./geo.key",
            "fly secrets list -a geo-api",
            "fly secrets unset GEOCODER REGION",
            "supabase secrets list",
            "aws secretsmanager create-secret --name geo --secret-string file://geo.json",
            "the docs say to run fly secrets set NAME=VALUE for each one",
        ],
    );
}

/// Config directives that hold a password, and `.pgpass` lines.
#[test]
fn config_directives_and_pgpass_lines() {
    let p = pw;
    check(&[
        ("redis.conf", format!("requirepass {}", p(60)), p(60)),
        (
            "redis.conf",
            format!("# replication\nmasterauth \"{}\"", p(61)),
            p(61),
        ),
        (
            "redis CONFIG SET",
            format!("redis-cli CONFIG SET requirepass '{}'", p(62)),
            p(62),
        ),
        (
            "wpa_supplicant",
            format!("network={{\n    ssid=\"home\"\n    psk=\"{}\"\n}}", p(63)),
            p(63),
        ),
        (
            "NetworkManager",
            format!("[wifi-security]\nkey-mgmt=wpa-psk\npsk={}", p(64)),
            p(64),
        ),
        (
            ".pgpass",
            format!("db.internal:5432:app:app_user:{}", p(65)),
            p(65),
        ),
        (".pgpass", format!("*:*:*:postgres:{}", p(66)), p(66)),
        (
            ".pgpass",
            format!("echo \"localhost:5432:*:bob:{}\" >> ~/.pgpass", p(67)),
            p(67),
        ),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "requirepass is set in redis.conf",
            "# requirepass foobared",
            "psk=$WIFI_PSK",
            "root:x:0:0:root:/root:/bin/bash",
            "10:20:30:40:5060",
            "INFO:8080:main:worker:started",
        ],
    );
}

/// Credentials named in prose in other languages and scripts (a name in a
/// Latin script also before a linking word, "das Passwort ist V"; one in
/// another script before a colon or `=`); the sentence's next word is not
/// one.
#[test]
fn credentials_named_in_other_languages() {
    let p = pw;
    let k = |n| rs(n, ALNUM, 32);
    check(&[
        ("fr", format!("le mot de passe est {}", p(100)), p(100)),
        ("es", format!("la contraseña es {}", p(101)), p(101)),
        ("de", format!("das Passwort ist {}", p(102)), p(102)),
        ("pt", format!("a senha é {}", p(103)), p(103)),
        ("nl", format!("wachtwoord: {}", p(104)), p(104)),
        ("pl", format!("hasło: {}", p(105)), p(105)),
        ("tr", format!("şifre: {}", p(106)), p(106)),
        ("sv", format!("Lösenord: {}", p(107)), p(107)),
        ("vi", format!("mật khẩu: {}", p(108)), p(108)),
        ("ru", format!("пароль: {}", p(109)), p(109)),
        ("ru", format!("ПАРОЛЬ = {}", p(110)), p(110)),
        ("el", format!("κωδικός: {}", p(111)), p(111)),
        ("he", format!("סיסמה: {}", p(112)), p(112)),
        ("ar", format!("كلمة المرور: {}", p(113)), p(113)),
        ("hi", format!("पासवर्ड: {}", p(114)), p(114)),
        ("ja", format!("パスワード：{}", p(115)), p(115)),
        ("zh", format!("密码：{}", p(116)), p(116)),
        ("zh", format!("数据库密码 : {}", p(117)), p(117)),
        ("ko", format!("비밀번호: {}", p(118)), p(118)),
        ("de key", format!("API-Schlüssel: {}", k(119)), k(119)),
        ("fr key", format!("clé API : {}", k(120)), k(120)),
        ("es key", format!("clave de API: {}", k(121)), k(121)),
        ("ja key", format!("APIキー: {}", k(122)), k(122)),
        ("ru key", format!("токен: {}", k(123)), k(123)),
        ("zh key", format!("令牌：{}", k(124)), k(124)),
        // Linking words and dashes instead of a colon.
        ("zh link", format!("密码是 {}", p(125)), p(125)),
        ("zh link", format!("数据库密码为{}", p(126)), p(126)),
        ("ja link", format!("パスワードは {} です", p(127)), p(127)),
        ("ko link", format!("비밀번호는 {}", p(128)), p(128)),
        ("ru dash", format!("пароль — {}", p(129)), p(129)),
        ("ru dash", format!("пароль от базы — {}", p(130)), p(130)),
        ("ru dash", format!("токен для CI – {}", k(131)), k(131)),
        ("ja key link", format!("APIキーは{}", k(132)), k(132)),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "das Passwort ist falsch",
            "Passwort vergessen? Klicken Sie hier",
            "la contraseña es incorrecta",
            "пароль неверный",
            "パスワードを忘れた場合",
            "密码错误，请重试",
            "le mot de passe est trop court (8 caractères)",
            "Пароль должен содержать 8 символов",
            "密码是必填项",
            "パスワードは 8 文字以上です",
            "パスワードは GitHub の設定から変更できます",
            "비밀번호는 안전하게 보관하세요",
            "пароль — это ключ к аккаунту",
            "пароль от базы — в 1Password",
        ],
    );
}

/// A password changed or set in prose, `pass` as a noun or a bare
/// config key, a login pair named in prose, and a short key named in
/// prose (mixed case and digits).
#[test]
fn password_changes_pass_keys_login_pairs_and_short_prose_keys() {
    let short = |n| {
        format!(
            "{}{}{}",
            rs(n, "ABCDEFGHJKLMNPQRSTUVWXYZ", 3),
            rs(n + 1, "abcdefghijkmnopqrstuvwxyz", 5),
            rs(n + 2, "23456789", 3)
        )
    };
    check(&[
        (
            "password change",
            format!("set the password to {}", pw(1)),
            pw(1),
        ),
        (
            "password change",
            format!("the db password was changed to {} yesterday", pw(2)),
            pw(2),
        ),
        (
            "password change",
            format!("Password has been reset to {}.", pw(3)),
            pw(3),
        ),
        (
            "password change",
            format!("I set MYSQL_ROOT_PASSWORD to {} in compose", pw(4)),
            pw(4),
        ),
        (
            "password change",
            format!("change password to {} please", pw(5)),
            pw(5),
        ),
        (
            "password change",
            format!("passphrase updated to '{}'", pw(6)),
            pw(6),
        ),
        (
            "pass as a noun",
            format!("my sudo pass is {}", pw(7)),
            pw(7),
        ),
        (
            "pass as a noun",
            format!("the wifi pass was {} before", pw(8)),
            pw(8),
        ),
        ("pass key line", format!("pass: {}", pw(9)), pw(9)),
        ("pass key line", format!("  pass = {}", pw(10)), pw(10)),
        (
            "pass key line",
            format!("auth:\n  user: bob\n  pass: {}", pw(11)),
            pw(11),
        ),
        ("pass key line", format!("- pass: {}", pw(12)), pw(12)),
        (
            "login pair",
            format!("login with bob:{} at the portal", pw(13)),
            pw(13),
        ),
        ("login pair", format!("log in as admin/{}", pw(14)), pw(14)),
        (
            "login pair",
            format!("sign in using ops@example.org:{} on staging", pw(15)),
            pw(15),
        ),
        (
            "login pair",
            format!("use admin/{} to log in", pw(16)),
            pw(16),
        ),
        (
            "login pair",
            format!("Login to the admin panel with root:{}", pw(17)),
            pw(17),
        ),
        (
            "short prose key",
            format!("the api key is {}", short(18)),
            short(18),
        ),
        (
            "short prose key",
            format!("my api token is {}", short(21)),
            short(21),
        ),
        (
            "short prose key",
            format!("api key for the geocoder: {}", short(24)),
            short(24),
        ),
        (
            "short prose key",
            format!("access token = {}", short(27)),
            short(27),
        ),
    ]);
}

/// A token given on standard input to a login command, as a pipe or a
/// here-string, fish's `set -x` of a secret-named variable, a C macro
/// named like a secret, and LDAP and keepalived password directives.
#[test]
fn tokens_on_stdin_fish_exports_macros_and_directives() {
    let tok = |n| rs(n, ALNUM, 40);
    check(&[
        (
            "here-string",
            format!("gh auth login --with-token <<< {}", tok(1)),
            tok(1),
        ),
        (
            "here-string",
            format!(
                "docker login ghcr.io -u bob --password-stdin <<< '{}'",
                pw(2)
            ),
            pw(2),
        ),
        (
            "pipe",
            format!("echo \"{}\" | gh auth login --with-token", tok(3)),
            tok(3),
        ),
        (
            "pipe",
            format!("printf '%s' {} | cli login --token-stdin", tok(4)),
            tok(4),
        ),
        ("fish", format!("set -x DB_PASSWORD {}", pw(5)), pw(5)),
        ("c macro", format!("#define WIFI_PASS \"{}\"", pw(8)), pw(8)),
        (
            "c macro",
            format!("#define SECRET_API_KEY \"{}\"", tok(9)),
            tok(9),
        ),
        (
            "c macro",
            format!("#define MQTT_PASSWORD  L\"{}\"", pw(10)),
            pw(10),
        ),
        (
            "config directive",
            format!("    auth_pass {}", pw(11)),
            pw(11),
        ),
        ("config directive", format!("bindpw {}", pw(12)), pw(12)),
        ("config directive", format!("bind_pw = {}", pw(13)), pw(13)),
        ("config directive", format!("rootpw {}", pw(14)), pw(14)),
        ("fish", format!("set -gx GITHUB_TOKEN {}", tok(6)), tok(6)),
        (
            "fish",
            format!("set --export OPENAI_API_KEY '{}'", tok(7)),
            tok(7),
        ),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "gh auth login --with-token < token.txt",
            "gh auth login --with-token <<< \"$GH_TOKEN\"",
            "set -x",
            "set -euxo pipefail",
            "set -x DB_PASSWORD $DB_PASSWORD",
            "set -gx PATH $HOME/bin $PATH",
            "#define COMPASS_MODEL \"HMC5883\"",
            "#define PASSWORD_MAX_LEN 64",
            "#define TOKEN_TYPE \"bearer\"",
            "rootpw {SSHA}",
            "auth_pass $VRRP_PASS",
        ],
    );
}

/// A one-word password of letters only, named in prose where the
/// clause ends after it; the words that end such a clause as often stay.
#[test]
fn one_word_passwords_in_prose() {
    let word = |n| rs(n, "abcdefghijkmnopqrstuvwxyz", 7);
    check(&[
        (
            "one word",
            format!("the root password is {}", word(1)),
            word(1),
        ),
        (
            "one word",
            format!("The default password is {}.", word(2)),
            word(2),
        ),
        (
            "one word",
            format!("wifi password was {}, ask me if it fails", word(3)),
            word(3),
        ),
        (
            "one word",
            format!("my password is now '{}' and it works", word(4)),
            word(4),
        ),
        (
            "one word",
            format!("the passphrase is {}!", word(5).to_uppercase()),
            word(5).to_uppercase(),
        ),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "the password is wrong, try again",
            "the password is required for login",
            "the password is never logged",
            "the password is stored in the vault",
            "the password is hashed.",
            "the password is expiring soon",
            "the password is case sensitive",
            "your password is too short",
            "their password is about to expire.",
            "a password is valid. When it expires",
            "the group password is empty and the user",
            "the password was locked.",
            "the password was last changed in May",
            "The PASSWORD is expected, not the token",
            "the password is optional",
            "the password is plaintext!",
            "the password is secure and rotated",
        ],
    );
}

/// Prose and code that look like the classes above but hold no secret.
#[test]
fn habit_near_misses_do_not_fire() {
    let s = scanner();
    let sha = rs(95, HEX, 40);
    assert_no_findings(
        &s,
        [
            "the api key is stored in the vault, see docs".to_string(),
            "Set the client secret in the dashboard and restart.".to_string(),
            "login with your account / password on the portal".to_string(),
            "user: admin / password: (ask ops)".to_string(),
            "docker login -u bob --password-stdin < token.txt".to_string(),
            "docker login -u bob -p --password-stdin < token.txt".to_string(),
            "curl -u $USER:$TOKEN https://api.example.com".to_string(),
            "SECRET_KEY=${SECRET_KEY}".to_string(),
            "API_TOKEN=$(cat /run/secrets/token)".to_string(),
            format!("commit {sha} fixes the access token refresh"),
            "const SECRET_LEN: usize = 32;".to_string(),
            "key: base64:".to_string(),
            "echo hello | base64 -d".to_string(),
            "cost is $6 per month and $5 per seat".to_string(),
            "the password is wrong, try again".to_string(),
            "password: ${DB_PASSWORD}".to_string(),
            "Forgot password? Reset it from the login page.".to_string(),
            "the password for the db is in 1Password".to_string(),
            "tests pass now; user admin pass review next".to_string(),
            // A password's change without one, `pass` as a tally, a flag, a
            // type or a reference, a login without a password, a short
            // value named in prose that is a word or a name.
            "set the password to something stronger".to_string(),
            "the password was changed to meet the policy".to_string(),
            "password reset to default".to_string(),
            "I set MYSQL_ROOT_PASSWORD to the value in .env".to_string(),
            "the first pass is slow, the second pass is fast".to_string(),
            "my pass is valid until June".to_string(),
            "pass: 12".to_string(),
            "pass: 3/3".to_string(),
            "pass: true".to_string(),
            "  pass: string;".to_string(),
            "pass: ${SMTP_PASS}".to_string(),
            "pass = None".to_string(),
            "login with your account".to_string(),
            "log in as root/admin".to_string(),
            "sign in with google:oauth".to_string(),
            "use admin/admin to log in".to_string(),
            "login with https://example.com/auth".to_string(),
            "the api key is configured".to_string(),
            "the api key is EXPIRED_KEY".to_string(),
            "the access token is refreshed every hour".to_string(),
            "api key: ANTHROPIC_API_KEY".to_string(),
            "the api key is abcd1234efgh".to_string(),
            "let password = read_password()?;".to_string(),
            // The command-line clients above without a password: a prompt,
            // a variable, a port, the next flag, a lower-case `-p`.
            "mongodump -u admin -p --authenticationDatabase admin".to_string(),
            "rdesktop -u bob -p - host.example.com".to_string(),
            "az login --service-principal -u http://app -p $AZ_SECRET --tenant t".to_string(),
            "docker run -u 1000 -p 8080:80 nginx".to_string(),
            "sqlcmd -S db -U sa -p 1 -Q \"SELECT 1\"".to_string(),
            "net user bob /domain".to_string(),
            "net use Z: \\\\fileserver\\share".to_string(),
            "net user bob * /add".to_string(),
            "smbclient -L //fs -U bob".to_string(),
            "xfreerdp /v:host /u:bob /p:%RDP_PASS%".to_string(),
            // Prose about those commands: the word after them is the
            // sentence's next word, not a password.
            "the net user command lists accounts".to_string(),
            "we checked the mongo shell -p flag".to_string(),
            "then net use Z: \\\\server\\share persistent yes".to_string(),
            // The tools above with no password on the line: a prompt, a
            // variable, a reference, prose.
            "zip -r out.zip dir/ && unzip -p out.zip a.txt".to_string(),
            "openssl rsa -in k.pem -passin env:KEY_PASS -out plain.pem".to_string(),
            "openssl pkcs12 -export -passout file:pass.txt -out c.p12".to_string(),
            "keytool -list -keystore ks.jks -storepass:env STORE_PASS".to_string(),
            "ssh-keygen -t ed25519 -N '' -f deploy_key".to_string(),
            "ssh-keygen -p -f key && scp -P 2222 key host:".to_string(),
            "htpasswd -c /etc/nginx/.htpasswd admin".to_string(),
            "htpasswd -b /etc/nginx/.htpasswd admin \"$ADMIN_PASS\"".to_string(),
            "ldapsearch -x -W -D cn=admin,dc=corp -b dc=corp".to_string(),
            "echo $SUDO_PASS | sudo -S apt-get update".to_string(),
            "echo hello | sudo -S true".to_string(),
            "sqlplus / as sysdba".to_string(),
            "sqlplus -S scripts/run.sql".to_string(),
            "/// (identified by `property_name`) corresponds to the value".to_string(),
            "each row is identified by UUID in the users table".to_string(),
            "the secret to success is patience".to_string(),
            "the token for the request is expired".to_string(),
            // Indexes, two-field settings and secret-storing commands with
            // no secret in them: a code name, a reference, a variable, a
            // file, a plain setting.
            "tokens[i] = count".to_string(),
            "data[\"token\"] = token_value".to_string(),
            "cache[secret_id] = compute(x)".to_string(),
            "<add key=\"LogLevel\" value=\"Debug42\" />".to_string(),
            "<add key=\"TokenFile\" value=\"C:\\\\keys\\\\tok.txt\" />".to_string(),
            "- name: SECRET_NAME\n  value: my-app-secret".to_string(),
            "- name: API_TOKEN\n  valueFrom:\n    secretKeyRef: {name: x, key: y}".to_string(),
            "- name: GITHUB_TOKEN\n  value: ${{ secrets.GITHUB_TOKEN }}".to_string(),
            "requests.get(url, auth=(user, password))".to_string(),
            "the tests pass: 12 of 12".to_string(),
            "pass: true".to_string(),
            "Authorization: Bearer".to_string(),
            "gh secret set NPM_TOKEN < token.txt".to_string(),
            "aws ssm put-parameter --name /app/level --value Debug42 --type String".to_string(),
            "git config --global user.signingkey 3AA5C34371567BD2".to_string(),
            "echo $TOKEN | wrangler secret put API_TOKEN".to_string(),
        ],
    );
}

/// A value read line by line in plain text (an element's value on the
/// line after its tag, an `env` entry's `value:` under its `name:`)
/// reports as the rule that reads the same text whole in a decoded view.
#[test]
fn line_by_line_values_report_as_their_rules() {
    let s = scanner();
    let v = pw(90);
    for (text, rule) in [
        (
            format!("<db>\n<password>\n{v}\n</password>\n</db>"),
            "xml-element-secret",
        ),
        (
            format!("env:\n  - name: DB_PASSWORD\n    value: \"{v}\""),
            "env-entry-secret",
        ),
    ] {
        for input in [text.clone(), json_line(&text)] {
            let rules: Vec<String> = s.scan(&input).iter().map(|f| f.rule.to_string()).collect();
            assert_eq!(rules, [rule], "{input}");
        }
    }
}

/// Passwords handed to calls in code: a setter or builder named for the
/// password, the positional password of a login or connect call or of a
/// credential type's constructor, a browser test typing into a password
/// field, a Go MySQL DSN.
#[test]
fn passwords_handed_to_calls() {
    check(&[
        ("setter", format!("user.set_password(\"{}\")", pw(1)), pw(1)),
        ("setter", format!("u.setPassword(\"{}\");", pw(2)), pw(2)),
        (
            "setter",
            format!("Client::builder().password(\"{}\").build()", pw(3)),
            pw(3),
        ),
        ("setter", format!(".with_password('{}')", pw(4)), pw(4)),
        (
            "setter",
            format!("url.set_password(Some(\"{}\"))", pw(5)),
            pw(5),
        ),
        (
            "setter",
            format!("keyring.set_password(\"github\", \"bob\", \"{}\")", pw(6)),
            pw(6),
        ),
        (
            "login call",
            format!("imap.login('bob@example.com', '{}')", pw(7)),
            pw(7),
        ),
        (
            "login call",
            format!("smtp.login(user, \"{}\")", pw(8)),
            pw(8),
        ),
        (
            "credential type",
            format!("new NetworkCredential(\"bob\", \"{}\")", pw(9)),
            pw(9),
        ),
        (
            "credential type",
            format!(
                "new PasswordAuthentication(\"bob\", \"{}\".toCharArray())",
                pw(10)
            ),
            pw(10),
        ),
        (
            "credential type",
            format!("new UsernamePasswordCredentials(\"bob\", \"{}\")", pw(11)),
            pw(11),
        ),
        (
            "credential type",
            format!("pika.PlainCredentials('guest', '{}')", pw(12)),
            pw(12),
        ),
        (
            "connect call",
            format!("DriverManager.getConnection(url, \"sa\", \"{}\");", pw(13)),
            pw(13),
        ),
        (
            "connect call",
            format!(
                "new PDO(\"mysql:host=db;dbname=app\", \"root\", \"{}\");",
                pw(14)
            ),
            pw(14),
        ),
        (
            "connect call",
            format!(
                "$db = mysqli_connect(\"localhost\", \"root\", \"{}\", \"app\");",
                pw(15)
            ),
            pw(15),
        ),
        (
            "connect call",
            format!("pymysql.connect(\"db\", \"root\", \"{}\", \"app\")", pw(16)),
            pw(16),
        ),
        (
            "connect call",
            format!("ssh.connect(host, 22, \"root\", \"{}\")", pw(17)),
            pw(17),
        ),
        (
            "browser test",
            format!("cy.get('#password').type('{}')", pw(18)),
            pw(18),
        ),
        (
            "browser test",
            format!(
                "driver.find_element(By.ID, \"password\").send_keys(\"{}\")",
                pw(19)
            ),
            pw(19),
        ),
        (
            "browser test",
            format!(
                "await page.locator('input[name=password]').fill('{}')",
                pw(20)
            ),
            pw(20),
        ),
        (
            "browser test",
            format!("await page.type('#passwd', '{}')", pw(21)),
            pw(21),
        ),
        (
            "browser test",
            format!(
                "await userEvent.type(screen.getByLabelText(/password/i), '{}')",
                pw(22)
            ),
            pw(22),
        ),
        (
            "go dsn",
            format!(
                "db, err := sql.Open(\"mysql\", \"root:{}@tcp(db:3306)/app\")",
                pw(23)
            ),
            pw(23),
        ),
        (
            "go dsn",
            format!("DSN=app:{}@unix(/run/mysqld/mysqld.sock)/app", pw(24)),
            pw(24),
        ),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "user.set_password(new_password)",
            "if user.check_password(\"hunter2\"):",
            "send_reset_password(\"bob@example.com\")",
            "keyring.get_password(\"github\", \"bob\")",
            "form.password(\"Password\")",
            "smtp.login(user, password)",
            "client.login(\"bob\", \"admin\")",
            "ftp.login()",
            "new NetworkCredential(user, pass)",
            "DriverManager.getConnection(url, user, pass);",
            "ssh.connect(host, 22, user, password)",
            "cy.get('#password').type('{enter}')",
            "cy.get('#password').type(Cypress.env('PASSWORD'))",
            "driver.find_element(By.ID, \"password\").send_keys(Keys.RETURN)",
            "await page.fill('#username', 'alice')",
            "cy.get('#search').type('hello42')",
            "cy.get('.compass').type('north42')",
            "sql.Open(\"mysql\", os.Getenv(\"DSN\"))",
            "log.Printf(\"%s:%d@tcp(%s)\", user, port, host)",
        ],
    );
}

/// A password fed to a hashing command or call, a secret's fallback
/// value, and small command and config spellings.
#[test]
fn hashed_inputs_fallbacks_and_small_spellings() {
    let tok = |n| rs(n, ALNUM, 32);
    check(&[
        (
            "hash command",
            format!("openssl passwd -6 '{}'", pw(1)),
            pw(1),
        ),
        (
            "hash command",
            format!(
                "sudo useradd -m -p \"$(openssl passwd -1 {})\" alice",
                pw(2)
            ),
            pw(2),
        ),
        (
            "hash command",
            format!("openssl passwd -apr1 -salt xyz {}", pw(3)),
            pw(3),
        ),
        (
            "hash command",
            format!("mkpasswd -m sha-512 {}", pw(4)),
            pw(4),
        ),
        (
            "hash call",
            format!("bcrypt.hashpw(b\"{}\", bcrypt.gensalt())", pw(5)),
            pw(5),
        ),
        (
            "hash call",
            format!("$h = password_hash('{}', PASSWORD_DEFAULT);", pw(6)),
            pw(6),
        ),
        (
            "hash call",
            format!("User(password=make_password(\"{}\"))", pw(7)),
            pw(7),
        ),
        (
            "hash call",
            format!("BCrypt::Password.create(\"{}\")", pw(8)),
            pw(8),
        ),
        (
            "hash call",
            format!("passwordEncoder.encode(\"{}\")", pw(9)),
            pw(9),
        ),
        (
            "fallback",
            format!("const secret = process.env.JWT_SECRET || \"{}\";", tok(10)),
            tok(10),
        ),
        (
            "fallback",
            format!("const token = process.env.TOKEN ?? '{}';", tok(11)),
            tok(11),
        ),
        (
            "fallback",
            format!("$password = getenv('DB_PASS') ?: '{}';", pw(12)),
            pw(12),
        ),
        (
            "fallback",
            format!("pw = os.environ.get(\"DB_PASSWORD\") or \"{}\"", pw(13)),
            pw(13),
        ),
        (
            "fallback",
            format!(
                "let key = env::var(\"API_KEY\").unwrap_or(\"{}\".into());",
                tok(14)
            ),
            tok(14),
        ),
        (
            "lftp",
            format!("lftp -u bob,{} sftp://host", pw(15)),
            pw(15),
        ),
        (
            "vault login",
            format!("vault login s.{}", rs(16, ALNUM, 24)),
            rs(16, ALNUM, 24),
        ),
        (
            "vault login",
            format!("vault login -no-print hvs.{}", rs(17, URLSAFE, 90)),
            rs(17, URLSAFE, 90),
        ),
        (
            "npm _auth",
            format!("_auth={}", rs(18, B64, 28)),
            rs(18, B64, 28),
        ),
        (
            "npm _auth",
            format!("//registry.example.com/:_auth=\"{}\"", rs(19, B64, 32)),
            rs(19, B64, 32),
        ),
        ("pw suffix", format!("DB_PW={}", pw(20)), pw(20)),
        ("pw suffix", format!("  root_pw: \"{}\"", pw(21)), pw(21)),
        (
            "expect send",
            format!(
                "expect -c 'spawn ssh bob@h; expect \"Password:\"; send \"{}\\r\"; interact'",
                pw(23)
            ),
            pw(23),
        ),
    ]);
    // A script's lines, one text in a transcript's decoded view (plain
    // text is read line by line: the `send` line alone says nothing).
    let s = scanner();
    for (script, secret) in [
        (
            format!("expect \"password:\"\nsend \"{}\\r\"", pw(22)),
            pw(22),
        ),
        (
            format!(
                "spawn ssh bob@host\nexpect \"assword\"\nsend -- \"{}\\n\"",
                pw(24)
            ),
            pw(24),
        ),
    ] {
        let r = s.redact(&json_line(&script)).expect("redacts");
        assert!(!r.text.contains(secret.as_str()), "{}", r.text);
    }
    assert_no_findings(
        &scanner(),
        [
            "openssl passwd -6 -stdin < pw.txt",
            "openssl passwd -1 \"$PASSWORD\"",
            "mkpasswd -m help",
            "mkpasswd --method=sha-512 --stdin",
            "openssl passwd -salt xyz",
            "openssl passwd -1 -in pw.txt",
            "bcrypt.hashpw(password.encode(), bcrypt.gensalt())",
            "password_hash($password, PASSWORD_BCRYPT)",
            "const secret = process.env.JWT_SECRET || \"\";",
            "const token = process.env.TOKEN ?? 'localdev';",
            "const mode = process.env.MODE || \"production2\";",
            "pw = os.environ.get(\"DB_PASSWORD\") or None",
            "a token or \"two\" words",
            "lftp -u bob sftp://host",
            "lftp -u bob, sftp://host",
            "vault login -method=oidc",
            "vault login s.short",
            "_auth=",
            "DB_PW=$DB_PW",
            "my_pw_hash = hash(x)",
            "expect \"password:\"\nsend \"$pw\\r\"",
            "expect \"login:\"\nsend \"bob42\\r\"",
        ],
    );
}

/// YAML tags: `!!binary` / `!!str` keep a literal value after them (the
/// value is the secret, not the tag); `!Ref`, `!secret`, `!vault` name
/// where a value comes from and are no finding.
#[test]
fn yaml_tags_before_values() {
    let b = |n| rs(n, B64, 24);
    check(&[
        ("binary", format!("password: !!binary {}==", b(1)), b(1)),
        ("binary", format!("  api_token: !!binary {}", b(2)), b(2)),
        ("str", format!("secret_key: !!str {}", b(3)), b(3)),
        ("str", format!("db_password: !str '{}'", pw(4)), pw(4)),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "db_password: !secret db_password",
            "MasterUserPassword: !Ref DBPassword",
            "  Password: !Sub '{{resolve:secretsmanager:db}}'",
            "password: !vault |",
            "api_key: !ENV ${API_KEY}",
            "password: !!binary |",
        ],
    );
}

/// Device and broker clients' password flags, passwords piped to
/// `passwd`-like commands or handed over as a process substitution, and
/// `AUTH` commands typed at a Redis or SMTP prompt.
#[test]
fn device_flags_piped_passwords_and_auth_commands() {
    let b64 = |n| rs(n, B64, 28);
    check(&[
        (
            "device flag",
            format!(
                "ipmitool -I lanplus -H bmc -p 623 -U admin -P {} power status",
                pw(1)
            ),
            pw(1),
        ),
        (
            "device flag",
            format!("mosquitto_pub -h broker -u bob -P '{}' -t t -m hi", pw(2)),
            pw(2),
        ),
        (
            "device flag",
            format!("rabbitmqadmin -u guest -p {} list queues", pw(3)),
            pw(3),
        ),
        (
            "device flag",
            format!("snmpwalk -v2c -c {} switch01", pw(4)),
            pw(4),
        ),
        (
            "device flag",
            format!(
                "snmpget -v3 -u ops -l authPriv -a SHA -A {} -x AES -X {} host sysName.0",
                pw(5),
                pw(6)
            ),
            pw(6),
        ),
        (
            "device flag",
            format!(
                "snmpset -v3 -u ops -l authNoPriv -a SHA -A {} host x i 1",
                pw(5)
            ),
            pw(5),
        ),
        (
            "piped",
            format!("echo -e \"{0}\\n{0}\" | passwd bob", pw(7)),
            pw(7),
        ),
        (
            "piped",
            format!("printf '%s\\n' {} | sudo smbpasswd -s -a bob", pw(8)),
            pw(8),
        ),
        (
            "piped",
            format!("echo '{}' | gpg --batch --passphrase-fd 0 -c file", pw(9)),
            pw(9),
        ),
        (
            "substituted file",
            format!(
                "restic -r s3:bucket init --password-file <(echo {})",
                pw(10)
            ),
            pw(10),
        ),
        (
            "substituted file",
            format!(
                "borg init --passphrase-file=<(printf '%s' '{}') repo",
                pw(11)
            ),
            pw(11),
        ),
        (
            "auth command",
            format!("127.0.0.1:6379> AUTH {}", pw(12)),
            pw(12),
        ),
        (
            "auth command",
            format!("redis-cli -h cache AUTH default {}", pw(13)),
            pw(13),
        ),
        (
            "auth command",
            format!("C: AUTH PLAIN {}", b64(14)),
            b64(14),
        ),
        (
            "hash call",
            format!("'password' => Hash::make('{}'),", pw(15)),
            pw(15),
        ),
        (
            "stored",
            format!("doppler secrets set DB_PASS {}", pw(16)),
            pw(16),
        ),
        (
            "stored",
            format!(
                "security add-generic-password -a bob -s svc -w '{}'",
                pw(17)
            ),
            pw(17),
        ),
        (
            "stored",
            format!("secret-tool store --label=db svc db <<< {}", pw(18)),
            pw(18),
        ),
        (
            "stored",
            format!("pass insert -e email/bob <<< '{}'", pw(19)),
            pw(19),
        ),
        (
            "substituted file",
            format!("gcloud secrets create db --data-file=<(echo -n {})", pw(20)),
            pw(20),
        ),
        ("redis auth", format!("redis.auth(\"{}\")", pw(21)), pw(21)),
        (
            "redis auth",
            format!("client.auth('{}', callback)", pw(22)),
            pw(22),
        ),
        ("ruby set", format!("set :password, \"{}\"", pw(23)), pw(23)),
        (
            "ruby set",
            format!("set :session_secret, '{}'", pw(24)),
            pw(24),
        ),
        ("r assign", format!("db_password <- \"{}\"", pw(25)), pw(25)),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "ipmitool -H bmc -p 623 -U admin -E power status",
            "mosquitto_sub -h broker -p 1883 -t sensors/#",
            "rabbitmqadmin -P 15672 list queues",
            "snmpwalk -v2c -c public switch01",
            "snmpwalk -v2c -c private switch01",
            "echo $NEW_PASSWORD | passwd --stdin bob",
            "echo done | passwd -S bob",
            "restic --password-file <(pass show restic) init",
            "S: 250-AUTH LOGIN PLAIN",
            "the AUTH header is required",
            "> AUTH",
            "Hash::make($request->password)",
            "doppler secrets set DB_PASS",
            "security add-generic-password -a bob -s svc -w",
            "passport.auth('jwt')",
            "firebase.auth()",
            "set :password, ENV['DEPLOY_PASSWORD']",
            "set :stage, 'production'",
            "token <- get_token()",
            "ch <- \"done\"",
        ],
    );
}

/// A YAML, INI or properties setting whose bare value holds blanks runs
/// to the end of its line: every word of it goes, not only the first. A
/// trailing comment stays, and so does the command after a shell
/// environment prefix (`NAME=value cmd`).
#[test]
fn setting_values_run_to_the_line_end() {
    let word = |n| rs(n, ALNUM, 7);
    let phrase = |n: u64| format!("{} {} {}", word(n), word(n + 100), word(n + 200));
    check(&[
        ("yaml", format!("password: {}", phrase(1)), word(201)),
        (
            "yaml",
            format!("  db_password: {} # rotated", phrase(2)),
            word(202),
        ),
        ("ini", format!("password = {}", phrase(3)), word(203)),
        (
            "ini",
            format!("api_key = {}9{} ; prod", rs(4, ALNUM, 15), phrase(4)),
            word(204),
        ),
        (
            "properties",
            format!("db.password : {}", phrase(5)),
            word(205),
        ),
    ]);
    let s = scanner();
    let tail = |n| format!("{}7", rs(n, ALNUM, 8));
    for (text, secret, kept) in [
        (
            format!("  db_password: {}5 {} # rotated", word(6), tail(6)),
            tail(6),
            "# rotated",
        ),
        (
            format!("DB_PASSWORD={} npm run migrate", tail(7)),
            tail(7),
            "npm run migrate",
        ),
        (
            format!("the password: {} was leaked", tail(8)),
            tail(8),
            "the password: ",
        ),
    ] {
        let r = s.redact(&text).expect("redacts");
        assert!(r.text.contains(kept), "{}", r.text);
        assert!(!r.text.contains(secret.as_str()), "{}", r.text);
    }
}

/// Flags named for a secret, and package managers' and CI tools'
/// credentials given on the command line.
#[test]
fn tool_credentials_on_the_command_line() {
    let tok = |n| rs(n, ALNUM, 32);
    check(&[
        (
            "dashed flag",
            format!(
                "argocd account update-password --current-password {} --new-password x",
                pw(1)
            ),
            pw(1),
        ),
        ("dashed flag", format!("mytool --admin-password={}", pw(2)), pw(2)),
        (
            "dashed flag",
            format!("consul acl token create -secret {}", tok(3)),
            tok(3),
        ),
        (
            "dashed flag",
            format!("runner register --registration-token {}", tok(4)),
            tok(4),
        ),
        (
            "package manager",
            format!("poetry config http-basic.private bob {}", pw(5)),
            pw(5),
        ),
        (
            "package manager",
            format!("composer config --global http-basic.repo.example.com bob {}", pw(6)),
            pw(6),
        ),
        (
            "package manager",
            format!("bundle config set --global gems.example.com bob:{}", pw(7)),
            pw(7),
        ),
        (
            "package manager",
            format!(
                "dotnet nuget add source https://x/index.json -n x -u bob -p {} --store-password-in-clear-text",
                pw(8)
            ),
            pw(8),
        ),
        (
            "package manager",
            format!("twine upload -u __token__ -p {} dist/*", tok(9)),
            tok(9),
        ),
        (
            "ci tool",
            format!("java -jar jenkins-cli.jar -s http://ci -auth admin:{} build job", pw(10)),
            pw(10),
        ),
        ("ci tool", format!("cargo login {}", tok(11)), tok(11)),
        (
            "ci tool",
            format!("pulumi config set --secret dbPassword {}", pw(12)),
            pw(12),
        ),
        (
            "ci tool",
            format!("pulumi config set dbPassword '{}' --secret", pw(13)),
            pw(13),
        ),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "docker login --password-stdin",
            "mytool --reset-password bob",
            "vault write auth/token --display-name ci",
            "poetry config http-basic.private bob",
            "bundle config set --local path vendor/bundle",
            "twine upload -r testpypi dist/*",
            "jenkins-cli -auth @creds.txt build job",
            "cargo login",
            "pulumi config set region eu-west-1",
            "pulumi config set --secret dbPassword",
        ],
    );
    // A bare `--password` is the other rules' (one finding), not this one's.
    let rules: Vec<String> = scanner()
        .scan(&format!("mytool --password {}", pw(14)))
        .iter()
        .map(|f| f.rule.to_string())
        .collect();
    assert!(
        rules.len() == 1 && rules[0] != "dashed-flag-secret",
        "{rules:?}"
    );
}

/// Session 18: a secret named in a sentence rather than assigned — a
/// variable's name with `is` / `to` (`JWT_SECRET is V`), a key named by
/// its job (`master key: V`), a bare secret word (`the token is V`), a
/// login pair with a spaced slash or after `creds are`.
#[test]
fn secrets_named_in_prose_sentences() {
    let sec = |n| rs(n, ALNUM, 32);
    let hex = |n| rs(n, HEX, 64);
    check(&[
        ("variable is", format!("JWT_SECRET is {}", sec(1)), sec(1)),
        (
            "variable to",
            format!("set the env var SECRET_KEY_BASE to {}", hex(2)),
            hex(2),
        ),
        (
            "variable was",
            format!("STRIPE_SECRET_KEY was `{}` before I rotated it", sec(3)),
            sec(3),
        ),
        (
            "variable =",
            format!("and NOTION_API_KEY = {} in the notes", sec(4)),
            sec(4),
        ),
        (
            "variable is now",
            format!("the SLACK_BOT_TOKEN is now {}", sec(5)),
            sec(5),
        ),
        (
            "password variable",
            format!("DB_PASSWORD is {}", pw(6)),
            pw(6),
        ),
        (
            "password variable",
            format!("the ADMIN_PASS is now '{}'", pw(7)),
            pw(7),
        ),
        (
            "password variable",
            format!("POSTGRES_ROOT_PWD was {} until today", pw(8)),
            pw(8),
        ),
        (
            "qualified key",
            format!("rails credentials master key: {}", rs(9, HEX, 32)),
            rs(9, HEX, 32),
        ),
        (
            "qualified key",
            format!("the signing key is {}", hex(10)),
            hex(10),
        ),
        (
            "qualified key",
            format!("encryption key for prod = {}=", rs(11, B64, 43)),
            rs(11, B64, 43),
        ),
        (
            "qualified key",
            format!("Session_Key: {}", sec(12)),
            sec(12),
        ),
        (
            "bare secret word",
            format!("the token is {}", rs(13, ALNUM, 40)),
            rs(13, ALNUM, 40),
        ),
        (
            "bare secret word",
            format!("my key was \"{}\"", sec(14)),
            sec(14),
        ),
        (
            "bare secret word",
            format!("OK, the secret is now {} (saved)", sec(15)),
            sec(15),
        ),
        (
            "login spaced slash",
            format!("login with alice / {}", pw(16)),
            pw(16),
        ),
        (
            "login spaced slash",
            format!("log in as admin / {}", pw(17)),
            pw(17),
        ),
        (
            "creds colon pair",
            format!("creds are bob:{}", pw(18)),
            pw(18),
        ),
        (
            "creds colon pair",
            format!("credentials for staging: deploy:{}", pw(19)),
            pw(19),
        ),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "API_KEY is required for this endpoint",
            "GITHUB_TOKEN is automatically provided by Actions",
            "SECRET_KEY_BASE to production.rb",
            "the DB_PASSWORD is empty",
            "DB_PASSWORD is ${DB_PASSWORD}",
            "primary key: id",
            "foreign key: user_id",
            "sort key: created_at_timestamp_index",
            "the master key is stored in config/master.key",
            "the token is expired",
            "the token is nearly_always_refreshed_later",
            "my key was wrong",
            "login with alice / the usual one",
            "creds are in the vault",
            "credentials: see https://wiki/creds",
            "output_tokens is 1024",
        ],
    );
}

/// Session 18: secrets handed to library calls and typed bindings —
/// signing and cipher keys, libcurl and LDAP options, an APIM subscription
/// key, Twilio's and OAuth 1's client pairs, typed constants, Gradle's
/// signing block, a provider's key read from `ENV[…]`, dotted `api.key`
/// properties and license keys.
#[test]
fn secrets_handed_to_library_calls() {
    let key = |n| rs(n, ALNUM, 32);
    let hex = |n| rs(n, HEX, 32);
    let sid = format!("AC{}", rs(99, HEX, 32));
    check(&[
        (
            "jwt",
            format!("jwt.encode(payload, \"{}\", algorithm=\"HS256\")", key(1)),
            key(1),
        ),
        (
            "jwt",
            format!("const t = jwt.sign(claims, '{}');", key(2)),
            key(2),
        ),
        (
            "jwt",
            format!("jwt.decode(token, \"{}\", algorithms=[\"HS256\"])", key(3)),
            key(3),
        ),
        (
            "hmac",
            format!("hmac.new(b\"{}\", msg, hashlib.sha256)", key(4)),
            key(4),
        ),
        (
            "hmac",
            format!("crypto.createHmac('sha256', '{}')", key(5)),
            key(5),
        ),
        (
            "cipher",
            format!("f = Fernet(b\"{}=\")", rs(6, URLSAFE, 43)),
            rs(6, URLSAFE, 43),
        ),
        (
            "cipher",
            format!("AES.new(b\"{}\", AES.MODE_GCM)", rs(7, ALNUM, 16)),
            rs(7, ALNUM, 16),
        ),
        (
            "cipher",
            format!("let key = Key::from_slice(b\"{}\");", key(8)),
            key(8),
        ),
        (
            "cipher",
            format!("HmacSha256::new_from_slice(b\"{}\")?", key(9)),
            key(9),
        ),
        (
            "cipher",
            format!(
                "new SecretKeySpec(\"{}\".getBytes(), \"HmacSHA256\")",
                key(10)
            ),
            key(10),
        ),
        (
            "oauth1",
            format!(
                "tweepy.OAuthHandler(\"{}\", \"{}\")",
                rs(11, ALNUM, 25),
                rs(12, ALNUM, 50)
            ),
            rs(12, ALNUM, 50),
        ),
        (
            "oauth1",
            format!(
                "OAuth1Session('{}', client_secret='{}')",
                rs(13, ALNUM, 25),
                key(14)
            ),
            key(14),
        ),
        (
            "libcurl",
            format!("curl_setopt($ch, CURLOPT_USERPWD, \"bob:{}\");", pw(15)),
            pw(15),
        ),
        (
            "libcurl",
            format!("curl_easy_setopt(h, CURLOPT_PASSWORD, \"{}\");", pw(16)),
            pw(16),
        ),
        (
            "ldap",
            format!("conn.simple_bind_s(\"cn=admin,dc=x\", \"{}\")", pw(17)),
            pw(17),
        ),
        (
            "ldap",
            format!("env.put(Context.SECURITY_CREDENTIALS, \"{}\");", pw(18)),
            pw(18),
        ),
        (
            "apim",
            format!(
                "client.DefaultRequestHeaders.Add(\"Ocp-Apim-Subscription-Key\", \"{}\");",
                hex(19)
            ),
            hex(19),
        ),
        (
            "apim",
            format!("curl \"https://api.x.io/v1?subscription-key={}\"", hex(20)),
            hex(20),
        ),
        (
            "twilio",
            format!("client = Client(\"{sid}\", \"{}\")", hex(21)),
            hex(21),
        ),
        (
            "twilio",
            format!("Twilio::REST::Client.new('{sid}', '{}')", hex(22)),
            hex(22),
        ),
        (
            "typed",
            format!("let apiToken: String = \"{}\"", key(23)),
            key(23),
        ),
        (
            "typed",
            format!("const clientSecret: string = '{}';", key(24)),
            key(24),
        ),
        (
            "typed",
            format!("static NSString *const kAPIKey = @\"{}\";", key(25)),
            key(25),
        ),
        ("gradle", format!("    storePassword '{}'", pw(26)), pw(26)),
        ("gradle", format!("    keyPassword \"{}\"", pw(27)), pw(27)),
        (
            "provider env",
            format!("ENV[\"STRIPE_KEY\"] = \"{}\"", key(28)),
            key(28),
        ),
        (
            "provider env",
            format!("ENV.fetch(\"MAPBOX_KEY\", \"{}\")", key(29)),
            key(29),
        ),
        ("dotted", format!("api.key={}", key(30)), key(30)),
        (
            "dotted",
            format!("System.setProperty(\"api.key\", \"{}\")", key(31)),
            key(31),
        ),
        ("license", format!("license_key = \"{}\"", key(32)), key(32)),
        (
            "license",
            format!("NEW_RELIC_LICENSE_KEY={}", rs(33, ALNUM, 40)),
            rs(33, ALNUM, 40),
        ),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "jwt.encode(payload, SECRET_KEY, algorithm=\"HS256\")",
            "jwt.sign(claims, process.env.JWT_SECRET)",
            "hmac.new(key, msg, hashlib.sha256)",
            "hmac.new(b\"key\", msg, digestmod)",
            "crypto.createHmac('sha256', secret)",
            "Fernet(Fernet.generate_key())",
            "serde_json::from_slice(b\"{\\\"a\\\":1}\")",
            "curl_setopt($ch, CURLOPT_USERPWD, $user . ':' . $pass);",
            "conn.simple_bind_s(dn, password)",
            "headers['Ocp-Apim-Subscription-Key'] = key",
            "let apiToken: String = \"\"",
            "const tokenType: string = 'Bearer';",
            "storePassword System.getenv(\"KS_PASS\")",
            "ENV.fetch(\"STRIPE_KEY\", nil)",
            "license_key = \"MIT\"",
            "api.key=${API_KEY}",
        ],
    );
}

/// Session 18: a wallet's recovery phrase and two-factor backup codes
/// written after their names.
#[test]
fn wallet_phrases_and_backup_codes() {
    let gh = |n| format!("{}-{}", rs(n, HEX, 5), rs(n + 100, HEX, 5));
    let google = |n| rs(n, "0123456789", 8);
    check(&[
        (
            "seed phrase",
            format!("seed phrase: {}", phrase(1, 12)),
            phrase(1, 12),
        ),
        (
            "seed phrase",
            format!("my recovery phrase is {} — keep it safe", phrase(2, 24)),
            phrase(2, 24),
        ),
        (
            "seed phrase",
            format!("MNEMONIC=\"{}\"", phrase(3, 12)),
            phrase(3, 12),
        ),
        (
            "seed phrase",
            format!("  mnemonic: '{}'", phrase(4, 18)),
            phrase(4, 18),
        ),
        (
            "backup codes",
            format!("recovery codes: {} {} {}", gh(5), gh(6), gh(7)),
            gh(6),
        ),
        (
            "backup codes",
            format!("backup code {}", google(8)),
            google(8),
        ),
        (
            "backup codes",
            format!(
                "GitLab recovery codes: {} {}",
                rs(12, HEX, 16),
                rs(13, HEX, 16)
            ),
            rs(13, HEX, 16),
        ),
        (
            "backup codes",
            format!("Backup codes are {}, {}", google(9), google(10)),
            google(10),
        ),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "mnemonic: \"test test test test test test test test test test test junk\"",
            "the seed phrase is twelve words you write down",
            "seed phrase: see the wallet docs",
            "recovery codes: regenerate them in settings",
            "backup code: none",
            "recovery codes: HTTP-ERROR",
            "backup codes 2023-2024 rotation",
            "mnemonic = bip39.generate_mnemonic()",
        ],
    );
}

/// Session 18: what tools print — a secret's row in a table (`vault kv
/// get`, Markdown), a sensitive `terraform output -json`, the password an
/// installer generated, `Your API key is: T`, `Password for the root user
/// is: S`.
#[test]
fn tables_sensitive_outputs_and_installer_notices() {
    let tok = |n| rs(n, ALNUM, 40);
    check(&[
        ("vault table", format!("db_pass            {}", pw(1)), pw(1)),
        ("vault table", format!("secret             {}", tok(2)), tok(2)),
        ("markdown table", format!("| admin_password | {} |", pw(3)), pw(3)),
        ("markdown table", format!("|api_token|{}|", tok(4)), tok(4)),
        (
            "terraform output",
            format!(
                "{{\"db_password\": {{\"sensitive\": true, \"type\": \"string\", \"value\": \"{}\"}}}}",
                pw(5)
            ),
            pw(5),
        ),
        (
            "terraform output",
            format!("\"sensitive\":true,\"type\":\"string\",\"value\":\"{}\"", pw(6)),
            pw(6),
        ),
        (
            "mysql notice",
            format!(
                "[Note] A temporary password is generated for root@localhost: {}",
                pw(7)
            ),
            pw(7),
        ),
        ("prose is:", format!("Your API key is: {}", tok(8)), tok(8)),
        (
            "prose is:",
            format!("Password for the root user is: {}", pw(9)),
            pw(9),
        ),
    ]);
    // Printed on a line of its own: one text only as a `tool_result`'s
    // string (plain text is read line by line).
    let s = scanner();
    for (text, secret) in [
        (
            format!(
                "Please use the following password to proceed to installation:\n\n{}\n\nThis may also be found at: /var/jenkins_home/secrets/initialAdminPassword",
                rs(10, HEX, 32)
            ),
            rs(10, HEX, 32),
        ),
        (
            format!(
                "The generated password for the elastic built-in superuser is:\n{}\n",
                rs(11, ALNUM, 20)
            ),
            rs(11, ALNUM, 20),
        ),
    ] {
        let r = s.redact(&json_line(&text)).expect("redacts");
        assert!(!r.text.contains(&secret), "survived: {}", r.text);
    }
    assert_no_findings(
        &scanner(),
        [
            "| token | string | the bearer token |",
            "| password | yes |",
            "secret             <none>",
            "tokens_used        1024",
            "bypass             enabled",
            "{\"sensitive\": false, \"type\": \"string\", \"value\": \"eu-west-1\"}",
            "admin_token = <sensitive>",
            "Your API key is: configured",
        ],
    );
}

/// Session 18: a credential named in another language with a phrase
/// between the name and the value — a copula after it (`Passwort für den
/// Server ist S`, `mot de passe de la base est S`), a word or a short
/// phrase before the colon (`Токен доступа: T`, `Пароль от базы: S`,
/// `Κωδικός πρόσβασης: S`) — and the access tokens of Romance languages.
#[test]
fn credentials_named_in_other_languages_with_a_phrase() {
    let tok = |n| rs(n, ALNUM, 40);
    check(&[
        (
            "german",
            format!("Das Passwort für den Server ist {}", pw(1)),
            pw(1),
        ),
        (
            "french",
            format!("Le mot de passe de la base est {}", pw(2)),
            pw(2),
        ),
        (
            "spanish",
            format!("La contraseña del servidor es {}", pw(3)),
            pw(3),
        ),
        ("portuguese", format!("A senha do banco é {}", pw(4)), pw(4)),
        ("french", format!("La clé API est {}", tok(5)), tok(5)),
        (
            "spanish",
            format!("Mi token de acceso es {}", tok(6)),
            tok(6),
        ),
        (
            "italian",
            format!("Il token di accesso è {}", tok(7)),
            tok(7),
        ),
        ("french", format!("jeton d'accès : {}", tok(8)), tok(8)),
        ("russian", format!("Токен доступа: {}", tok(9)), tok(9)),
        ("russian", format!("Пароль от базы: {}", pw(10)), pw(10)),
        ("greek", format!("Κωδικός πρόσβασης: {}", pw(11)), pw(11)),
        ("vietnamese", format!("Mật khẩu là {}", pw(12)), pw(12)),
        ("arabic", format!("كلمة المرور هي {}", pw(13)), pw(13)),
        ("hebrew", format!("הסיסמה היא {}", pw(14)), pw(14)),
        ("thai", format!("รหัสผ่านคือ {}", pw(15)), pw(15)),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "Das Passwort für den Server ist abgelaufen",
            "Le mot de passe de la base est trop court",
            "La contraseña del servidor es obligatoria",
            "Токен доступа: истёк",
            "Пароль от базы: см. хранилище",
            "Mật khẩu là bắt buộc",
            "Đây là trang đăng nhập",
        ],
    );
}

/// Session 18: servers' user commands and an archiver that take the
/// password as an argument.
#[test]
fn server_user_commands_and_rar() {
    check(&[
        (
            "redis acl",
            format!("ACL SETUSER bob on >{} ~* +@all", pw(1)),
            pw(1),
        ),
        (
            "redis acl",
            format!("127.0.0.1:6379> acl setuser ci on >{}", pw(2)),
            pw(2),
        ),
        (
            "mosquitto",
            format!("mosquitto_passwd -b /etc/mosquitto/passwd bob {}", pw(3)),
            pw(3),
        ),
        (
            "minio",
            format!("mc alias set minio http://x:9000 admin {}", pw(4)),
            pw(4),
        ),
        (
            "azure cli",
            format!("az sql server create -n x -g rg -u admin -p '{}'", pw(5)),
            pw(5),
        ),
        (
            "azure cli",
            format!(
                "az vm create -n vm -g rg --admin-password {} --image Ubuntu2204",
                pw(6)
            ),
            pw(6),
        ),
        ("rar", format!("rar a -p{} a.rar dir", pw(7)), pw(7)),
        ("rar", format!("rar a -hp{} a.rar dir", pw(8)), pw(8)),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "ACL SETUSER bob on nopass ~* +@all",
            "mosquitto_passwd -c /etc/mosquitto/passwd bob",
            "mc alias ls",
            "az vm create -n vm -g rg --generate-ssh-keys",
            "rar a -r a.rar dir",
        ],
    );
}

/// Session 18: mobile apps' settings — a property list's key named like a
/// secret and its string, an Android string resource named like one.
#[test]
fn plist_and_android_resource_secrets() {
    let key = |n| rs(n, ALNUM, 32);
    check(&[
        (
            "plist",
            format!("<key>api_secret</key><string>{}</string>", key(1)),
            key(1),
        ),
        (
            "plist",
            format!(
                "\t<key>StripeSecretKey</key>\n\t<string>{}</string>",
                key(2)
            ),
            key(2),
        ),
        (
            "android",
            format!("<string name=\"api_key\">{}</string>", key(3)),
            key(3),
        ),
        (
            "android",
            format!(
                "    <string name=\"facebook_client_token\">{}</string>",
                key(4)
            ),
            key(4),
        ),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "<key>CFBundleName</key><string>MyApp</string>",
            "<key>TokenURL</key><string>https://x.io/token</string>",
            "<string name=\"app_name\">My App</string>",
            "<string name=\"password\">Kennwort</string>",
            "<string name=\"hint_password\">Passwort</string>",
            "<string name=\"password_too_short\">TooShort1</string>",
            "<key>PasswordAutoFill</key><string>Enabled</string>",
            "<string name=\"api_key_hint\">Enter your key</string>",
        ],
    );
}

/// Django's secret-key alphabet (`get_random_secret_key`).
const DJANGO: &str = "abcdefghijklmnopqrstuvwxyz0123456789!@#$%^&*(-_=+)";

/// Every piece of `secret` between its symbols: a value cut at a symbol
/// leaves its tail, which is as much a leak as the whole.
fn pieces(secret: &str) -> Vec<String> {
    secret
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| p.len() >= 4)
        .map(str::to_string)
        .collect()
}

/// Every piece of each `(text, secret)`'s secret must go, bare and as a
/// `tool_result`: a value cut at a symbol leaks its tail.
fn check_pieces(s: &abcd_redact::Scanner, dirty: &[(String, String)]) {
    let mut failures = Vec::new();
    for (text, secret) in dirty {
        assert!(text.contains(secret.as_str()), "bad case {text}");
        assert!(
            pieces(secret).len() >= 2,
            "too few pieces to see a leak: {secret}"
        );
        for input in [text.clone(), json_line(text)] {
            let r = s.redact(&input).expect("redacts");
            let left: Vec<String> = pieces(secret)
                .into_iter()
                .filter(|p| r.text.contains(p.as_str()))
                .collect();
            if !left.is_empty() {
                failures.push(format!("left {left:?}: {input}\n  -> {}", r.text));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} spellings leak:\n{}",
        failures.len(),
        2 * dirty.len(),
        failures.join("\n")
    );
}

/// Values that open with a sigil (`$ % & * @ #`) and go on as no reference
/// does, and quoted flag values holding the shell's operators: each piece
/// of the value must go, bare and as a `tool_result`, and the references,
/// markup and paths that open the same way must stay.
#[test]
fn sigil_led_values_and_quoted_flag_values() {
    let s = scanner();
    let django = |seed: u64, first: char| format!("{first}{}", rs(seed, DJANGO, 49));
    let sym = |seed: u64, first: char, mid: char| {
        format!(
            "{first}{}{}{mid}{}",
            rs(seed, ALNUM, 6),
            seed % 10,
            rs(seed + 1000, ALNUM, 6)
        )
    };
    let mut dirty: Vec<(String, String)> = Vec::new();
    for (i, first) in ['$', '%', '&', '*', '@', '#'].into_iter().enumerate() {
        let k = django(300 + i as u64, first);
        dirty.push((format!("SECRET_KEY = '{k}'"), k.clone()));
        dirty.push((format!("DJANGO_SECRET_KEY=\"{k}\""), k.clone()));
        let p = sym(310 + i as u64, first, '^');
        dirty.push((format!("{{\"password\": \"{p}\"}}"), p.clone()));
        dirty.push((format!("DB_PASSWORD='{p}'"), p.clone()));
        dirty.push((format!("DB_PASSWORD={p}"), p.clone()));
        dirty.push((format!("export API_SECRET=\"{p}\""), p.clone()));
        dirty.push((format!("PGPASSWORD='{p}' psql -U app shop"), p.clone()));
        dirty.push((format!("  password: '{p}'"), p.clone()));
    }
    for (i, mid) in [';', '&', '|', '<', '>', '(', ' '].into_iter().enumerate() {
        let p = sym(320 + i as u64, 'x', mid);
        let n = i as u64;
        dirty.push((format!("mysql -u root -p'{p}' shop"), p.clone()));
        dirty.push((format!("docker login -u bob -p \"{p}\" ghcr.io"), p.clone()));
        dirty.push((format!("zip -P '{p}' backup.zip notes.txt"), p.clone()));
        dirty.push((format!("htpasswd -b .htpasswd admin '{p}'"), p.clone()));
        dirty.push((
            format!("sqlcmd -S db -U sa -P \"{p}\" -Q 'select 1'"),
            p.clone(),
        ));
        dirty.push((format!("ssh-keygen -t ed25519 -N '{p}' -f id"), p.clone()));
        dirty.push((format!("mongosh -u admin -p '{p}' db{n}"), p.clone()));
        if mid != ' ' {
            dirty.push((format!("pass={p}"), p.clone()));
        }
    }
    check_pieces(&s, &dirty);
    // References, markup and paths that open with the same bytes.
    assert_no_findings(
        &s,
        [
            "SECRET_KEY = '%(secret_key)s'",
            "password = \"$DB_PASSWORD\"",
            "PASSWORD=%APP_PASSWORD%",
            "password: ~/secrets/db.txt",
            "password: @Microsoft.KeyVault(SecretUri=https://kv.example.org/secrets/db/)",
            "api_key: *default_api_key",
            "PASSWORD\t\t\t*netrw-passwd*",
            "\"password\": \"#{ENV['DB_PASSWORD']}\"",
            "password: \"<%= ENV['DB_PASSWORD'] %>\"",
            "token: '${{ secrets.DEPLOY_TOKEN }}'",
            "mysql -u root -p\"$MYSQL_PWD\" shop",
            "docker login -u bob -p \"$(cat ~/.token)\" ghcr.io",
            "docker login -u bob -p \"${REGISTRY_PASSWORD}\" ghcr.io",
            "mysql -u root -p'$(pass show db/root)' shop",
            "password = \"&amp;\"",
            "secret_key = '$Id$'",
            "FORGOT_PASSWORD=$BASE_URL/classroom/#/forgot_password",
        ],
    );
}

/// What `vault operator init` prints, the password variables clients read
/// (`SSHPASS`, `REDISCLI_AUTH`), a credential piped into an encoder or a
/// digest, Composer's per-host tokens, `use S as the password`, Django's
/// user factories and Wi-Fi passphrases; and their near misses.
#[test]
fn unseal_keys_client_variables_encoders_and_passphrases() {
    let b64 = |n| format!("{}=", rs(n, B64, 43));
    let tok = |n| rs(n, ALNUM, 32);
    check(&[
        (
            "unseal key",
            format!("Unseal Key 1: {}", b64(401)),
            b64(401),
        ),
        (
            "unseal key",
            format!("Unseal Key 5: {}", b64(402)),
            b64(402),
        ),
        (
            "recovery key",
            format!("Recovery Key 2: {}", b64(403)),
            b64(403),
        ),
        (
            "unseal key hex",
            format!("Unseal Key 3: {}", rs(404, HEX, 66)),
            rs(404, HEX, 66),
        ),
        (
            "sshpass env",
            format!("export SSHPASS={}", pw(405)),
            pw(405),
        ),
        (
            "sshpass env",
            format!("SSHPASS='{}' sshpass -e ssh bob@10.0.0.9", pw(406)),
            pw(406),
        ),
        (
            "sshpass env",
            format!("set -gx SSHPASS {}", pw(407)),
            pw(407),
        ),
        (
            "redis env",
            format!("REDISCLI_AUTH={} redis-cli -h cache", pw(408)),
            pw(408),
        ),
        (
            "encoder",
            format!("echo -n '{}' | base64", pw(409)),
            pw(409),
        ),
        (
            "encoder",
            format!("echo -n \"{}\" | base64 -w0", pw(410)),
            pw(410),
        ),
        (
            "encoder",
            format!("printf '%s' '{}' | sha256sum", pw(411)),
            pw(411),
        ),
        (
            "encoder",
            format!("echo {} | openssl passwd -6 -stdin", pw(412)),
            pw(412),
        ),
        (
            "encoder",
            format!("echo -n {} | md5sum", tok(413)),
            tok(413),
        ),
        (
            "composer",
            format!("\"github-oauth\": {{\"github.com\": \"{}\"}}", tok(414)),
            tok(414),
        ),
        (
            "composer",
            format!(
                "{{\"gitlab-token\": {{\"gitlab.example.org\": \"{}\"}}}}",
                tok(415)
            ),
            tok(415),
        ),
        (
            "composer",
            format!("\"bearer\": {{ \"repo.example.org\": \"{}\" }}", tok(416)),
            tok(416),
        ),
        (
            "as the password",
            format!("use {} as the password", pw(417)),
            pw(417),
        ),
        (
            "as the password",
            format!("try '{}' as your password", pw(418)),
            pw(418),
        ),
        (
            "as the password",
            format!("I set {} as my password for the VPN", pw(419)),
            pw(419),
        ),
        (
            "django",
            format!(
                "User.objects.create_superuser('admin', 'admin@example.com', '{}')",
                pw(420)
            ),
            pw(420),
        ),
        (
            "django",
            format!(
                "user = User.objects.create_user(\"bob\", \"bob@corp.io\", \"{}\")",
                pw(421)
            ),
            pw(421),
        ),
        (
            "django",
            format!("create_user(username, email, password='{}')", pw(422)),
            pw(422),
        ),
        (
            "wifi",
            format!("wpa_passphrase HomeNet {}", pw(423)),
            pw(423),
        ),
        (
            "wifi",
            format!("wpa_passphrase 'Cafe Guest' '{}' > /etc/wpa.conf", pw(424)),
            pw(424),
        ),
        (
            "wifi",
            format!("    Key Content            : {}", pw(425)),
            pw(425),
        ),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "Unseal Key 1: <redacted>",
            "Unseal Progress: 1/3",
            "export SSHPASS=$DB_PASS",
            "echo -n hello | base64",
            "echo \"$PASSWORD\" | base64",
            "echo -n \"${TOKEN}\" | sha256sum",
            "echo done | md5sum",
            "\"github-oauth\": {}",
            "\"github-oauth\": {\"github.com\": \"<your token>\"}",
            "use it as the password",
            "use the same value as the password field",
            "User.objects.create_superuser('admin', 'admin@example.com', password)",
            "create_user(username, email, password=None)",
            "wpa_passphrase HomeNet",
            "    Key Content            : Absent",
        ],
    );
}

/// A key in a URL's query, a token as a URL's user with GitHub's
/// `x-oauth-basic`, and Oracle's `USER/PW@db` with a password holding the
/// shell's operators (quoted) or in a thin JDBC URL.
#[test]
fn url_query_keys_oauth_basic_users_and_oracle_logins() {
    let tok = |n| rs(n, ALNUM, 32);
    let opw = |n: u64| format!("{}&{}{}", rs(n, ALNUM, 7), n % 10, rs(n + 7, ALNUM, 3));
    check(&[
        (
            "query key",
            format!("https://maps.example.org/geo?key={}&address=x", tok(440)),
            tok(440),
        ),
        (
            "query key",
            format!(
                "curl 'https://api.example.org/v2/q?limit=5&key={}'",
                tok(441)
            ),
            tok(441),
        ),
        (
            "query key",
            format!("GET /search?authkey={} HTTP/1.1", tok(442)),
            tok(442),
        ),
        (
            "oauth basic",
            format!(
                "git clone https://{}:x-oauth-basic@github.com/org/repo.git",
                tok(443)
            ),
            tok(443),
        ),
        // A token that is the URL's whole user: its placeholder is no
        // `user:password` on a second pass (the check is idempotence).
        (
            "token as url user",
            format!(
                "git clone https://ghp_{}@github.com/org/repo.git",
                rs(447, ALNUM, 36)
            ),
            rs(447, ALNUM, 36),
        ),
        (
            "oracle",
            format!("sqlplus 'app/{}@ORCL'", opw(444)),
            opw(444),
        ),
        (
            "oracle",
            format!(
                "jdbc:oracle:thin:app/{}@//db.example.org:1521/ORCL",
                opw(445)
            ),
            opw(445),
        ),
        (
            "oracle",
            format!("url: jdbc:oracle:thin:scott/{}@db:1521:XE", pw(446)),
            pw(446),
        ),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "https://example.org/items?key=value&page=2",
            "https://s3.example.org/get?key=uploads/2024/report-final.pdf",
            "https://api.example.org/v1?key=${API_KEY}",
            "https://api.example.org/v1?key=YOUR_API_KEY_HERE",
            "https://api.example.org/v1?key=<your-api-key>",
            "https://user:x-oauth-basic@github.com/org/repo.git",
            "jdbc:oracle:thin:@//db.example.org:1521/ORCL",
            "jdbc:oracle:thin:app/${DB_PASSWORD}@db:1521/ORCL",
        ],
    );
}

/// WordPress's keys and salts: 64 characters drawn from letters, digits and
/// every ASCII symbol but the quotes (a blank among them), in
/// `wp-config.php`'s `define`s, the official image's `WORDPRESS_*`
/// variables and Bedrock's `.env`.
#[test]
fn wordpress_keys_and_salts() {
    const WP: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!@#$%^&*()-_ []{}<>~`+=,.;:/?|";
    let salt = |n: u64| {
        // The generator's 64 characters, with a digit and a blank inside.
        let mut v = rs(n, WP, 60);
        v.insert_str(20, &format!("{} {}", n % 10, rs(n + 1, ALNUM, 2)));
        v
    };
    let mut dirty = Vec::new();
    for (i, name) in [
        "AUTH_KEY",
        "SECURE_AUTH_KEY",
        "LOGGED_IN_KEY",
        "NONCE_KEY",
        "AUTH_SALT",
        "SECURE_AUTH_SALT",
        "LOGGED_IN_SALT",
        "NONCE_SALT",
    ]
    .into_iter()
    .enumerate()
    {
        let v = salt(460 + i as u64);
        dirty.push((format!("define( '{name}', '{v}' );"), v.clone()));
        dirty.push((format!("define(\"{name}\", \"{v}\");"), v.clone()));
        dirty.push((format!("WORDPRESS_{name}='{v}'"), v.clone()));
        dirty.push((format!("      WORDPRESS_{name}: \"{v}\""), v.clone()));
        dirty.push((format!("{name}='{v}'"), v.clone()));
    }
    let s = scanner();
    check_pieces(&s, &dirty);
    assert_no_findings(
        &s,
        [
            "define( 'AUTH_KEY',         'put your unique phrase here' );",
            "define('NONCE_SALT', getenv('NONCE_SALT'));",
            "AUTH_KEY=generateme",
            "NONCE_KEY=${NONCE_KEY}",
            "WORDPRESS_AUTH_KEY: ${WORDPRESS_AUTH_KEY}",
        ],
    );
}

/// Config and admin habits a probe of 152 spellings found leaking
/// (session 20): Dockerfile's `ENV NAME value`, Python bytes literals
/// under a key's name, Tomcat's `<Environment>`, LDAP password attributes
/// and `{SCHEME}` hashes, PostgreSQL's stored verifiers (PgBouncer's
/// `userlist.txt`), `useradd -p`, BIND's TSIG secrets, Fernet keys, and
/// two-factor backup codes listed a line below their heading.
#[test]
fn dockerfile_env_bytes_literals_ldap_hashes_and_recovery_codes() {
    let b64 = |n| format!("{}=", rs(n, B64, 43));
    let hex = |n, l| rs(n, HEX, l);
    let ssha = |n| format!("{}=", rs(n, B64, 27));
    let code = |n| format!("{}-{}", rs(n, HEX, 5), rs(n + 1, HEX, 5));
    check(&[
        (
            "dockerfile env",
            format!("ENV POSTGRES_PASSWORD {}", pw(501)),
            pw(501),
        ),
        (
            "dockerfile env",
            format!(
                "FROM mysql:8\nENV MYSQL_ROOT_PASSWORD \"{}\"\nEXPOSE 3306",
                pw(502)
            ),
            pw(502),
        ),
        (
            "dockerfile env",
            format!("  ENV DB_PASSWD '{}'", pw(503)),
            pw(503),
        ),
        (
            "bytes literal",
            format!("app.secret_key = b'{}'", rs(504, ALNUM, 32)),
            rs(504, ALNUM, 32),
        ),
        (
            "bytes literal",
            format!("SECRET_KEY = b\"{}\"", rs(505, ALNUM, 40)),
            rs(505, ALNUM, 40),
        ),
        (
            "bytes literal",
            format!("app.config[\"SECRET_KEY\"] = rb'{}'", rs(506, ALNUM, 24)),
            rs(506, ALNUM, 24),
        ),
        (
            "bytes literal",
            format!("signing_key: bytes = b'{}'", rs(507, ALNUM, 32)),
            rs(507, ALNUM, 32),
        ),
        (
            "bytes literal",
            // Flask's own example, `os.urandom(16)` printed.
            "app.secret_key = b'_5#y2L\"F4Q8z\\n\\xec]/'".to_string(),
            "_5#y2L\"F4Q8z\\n\\xec]/".to_string(),
        ),
        (
            "tomcat environment",
            format!(
                "<Environment name=\"DB_PASS\" value=\"{}\" type=\"java.lang.String\"/>",
                pw(508)
            ),
            pw(508),
        ),
        (
            "tomcat environment",
            format!(
                "<Environment name=\"mail/smtpPassword\" value=\"{}\" override=\"false\"/>",
                pw(509)
            ),
            pw(509),
        ),
        ("ldif", format!("olcRootPW: {}", pw(510)), pw(510)),
        ("ldif", format!("olcDbRootPW: {}", pw(511)), pw(511)),
        ("ldif", format!("userPassword:: {}", b64(512)), b64(512)),
        (
            "scheme hash",
            format!("userPassword: {{SSHA}}{}", ssha(513)),
            ssha(513),
        ),
        (
            "scheme hash",
            format!("olcRootPW: {{SSHA}}{}", ssha(514)),
            ssha(514),
        ),
        (
            "scheme hash",
            format!("rootpw {{SSHA512}}{}", b64(515)),
            b64(515),
        ),
        (
            "scheme hash",
            format!(
                "bob:{{SHA512-CRYPT}}$6${}${}:1001:1001::/home/bob::",
                rs(516, ALNUM, 16),
                rs(517, B64, 86)
            ),
            rs(517, B64, 86),
        ),
        (
            "scheme hash",
            format!("spring.security.user.password={{pbkdf2}}{}", hex(518, 80)),
            hex(518, 80),
        ),
        (
            "postgres verifier",
            format!("\"app\" \"md5{}\"", hex(519, 32)),
            hex(519, 32),
        ),
        (
            "postgres verifier",
            format!(
                "\"bob\" \"SCRAM-SHA-256$4096:{}${}:{}\"",
                b64(520),
                b64(521),
                b64(522)
            ),
            b64(521),
        ),
        (
            "postgres verifier",
            format!(" app     | md5{}", hex(523, 32)),
            hex(523, 32),
        ),
        (
            "useradd",
            format!("useradd -m -p '{}' deploy", pw(524)),
            pw(524),
        ),
        (
            "useradd",
            format!("sudo usermod -p {} bob", pw(525)),
            pw(525),
        ),
        (
            "tsig",
            format!(
                "key \"transfer\" {{\n    algorithm hmac-sha256;\n    secret \"{}\";\n}};",
                b64(526)
            ),
            b64(526),
        ),
        (
            "tsig",
            format!(
                "key \"rndc-key\" {{ algorithm hmac-md5; secret \"{}\"; }};",
                b64(527)
            ),
            b64(527),
        ),
        (
            "fernet",
            format!("AIRFLOW__CORE__FERNET_KEY={}=", rs(550, URLSAFE, 43)),
            rs(550, URLSAFE, 43),
        ),
        (
            "fernet",
            format!("    fernet_key: '{}='", rs(551, URLSAFE, 43)),
            rs(551, URLSAFE, 43),
        ),
        (
            "fernet",
            format!(
                "FERNET_KEYS={}=,{}=",
                rs(552, URLSAFE, 43),
                rs(553, URLSAFE, 43)
            ),
            rs(553, URLSAFE, 43),
        ),
        (
            "fernet",
            format!("f = Fernet(b'{}=')", rs(554, URLSAFE, 43)),
            rs(554, URLSAFE, 43),
        ),
    ]);
    // Codes listed under their heading, one a line: a `tool_result` holds
    // them in one decoded string. (Bare text is read line by line, and a
    // line of a code alone is not told from any other short token.)
    let s = scanner();
    for (text, secret) in [
        (
            format!(
                "Recovery codes:\n{}\n{}\n{}",
                code(530),
                code(533),
                code(536)
            ),
            code(533),
        ),
        (
            "backup codes:\n4821 9930\n1177 0452".to_string(),
            "1177 0452".to_string(),
        ),
    ] {
        let r = s.redact(&json_line(&text)).expect("redacts");
        assert!(!r.text.contains(&secret), "survived: {}", r.text);
    }
    assert_no_findings(
        &scanner(),
        [
            "ENV POSTGRES_PASSWORD_FILE=/run/secrets/db",
            "ENV POSTGRES_PASSWORD $DB_PASSWORD",
            "ENV NODE_ENV production",
            "app.secret_key = os.environ[\"SECRET_KEY\"]",
            "KEY_PREFIX = b\"session:\"",
            "secret_key = b''",
            "<Environment name=\"DB_PASS\" value=\"${db.pass}\"/>",
            "olcRootPW: {SSHA}",
            "userPassword: {SSHA}<hash>",
            "\"md5\": \"9e107d9d372bb6826bd81d3542a419d6\"",
            "md5sum: 9e107d9d372bb6826bd81d3542a419d6  file.tar",
            "useradd -m -p \"$(openssl passwd -6 \"$PW\")\" deploy",
            "useradd -m deploy",
            "secret \"changeme\";",
            "Recovery codes are shown once; store them safely.",
            "backup codes: see the vault",
            "fernet_key = Fernet.generate_key()",
            "AIRFLOW__CORE__FERNET_KEY=${FERNET_KEY}",
        ],
    );
}

/// Prompts that point at a token or a password the way people type them
/// (session 20's third probe): `use this token V`, `here's the token, V`,
/// `the password's V`, a `passcode`, a French `jeton`.
#[test]
fn tokens_pointed_at_and_password_contractions() {
    let tok = |n| rs(n, ALNUM, 32);
    check(&[
        ("pointed", format!("use this token {}", tok(560)), tok(560)),
        (
            "pointed",
            format!("here's the token, {} — it expires Friday", tok(561)),
            tok(561),
        ),
        ("pointed", format!("my new secret: {}", tok(562)), tok(562)),
        (
            "pointed",
            format!("Try with your token \"{}\"", tok(563)),
            tok(563),
        ),
        (
            "contraction",
            format!("the password's {}", pw(564)),
            pw(564),
        ),
        (
            "contraction",
            format!("the staging password\u{2019}s {} now", pw(565)),
            pw(565),
        ),
        ("passcode", format!("passcode: {}", pw(566)), pw(566)),
        ("passcode", format!("the passcode is {}", pw(567)), pw(567)),
        ("jeton", format!("jeton : {}", tok(568)), tok(568)),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "// the token is base64url-encoded",
            "this token expires after 3600 seconds",
            "the secret is stored in AWS_SECRET_MANAGER",
            "my token, which expires tomorrow",
            "Use this token to authenticate: see the docs",
            "the token isExpired check",
            "the secret SECRET_KEY_BASE_DUMMY",
            "the password's strength meter",
            "the password's hash is stored",
            "passcode: required",
            "jeton : voir la doc",
        ],
    );
}

/// Secrets handed to library calls in Go, Java, Ruby and Rust that a
/// fourth probe of 73 code lines found leaking (session 20).
#[test]
fn code_calls_in_go_java_ruby_and_rust() {
    let tok = |n| rs(n, ALNUM, 32);
    check(&[
        (
            "go smtp",
            format!(
                "auth := smtp.PlainAuth(\"\", \"bob@example.org\", \"{}\", \"smtp.example.org\")",
                pw(570)
            ),
            pw(570),
        ),
        (
            "go byte slice",
            format!("var jwtKey = []byte(\"{}\")", tok(571)),
            tok(571),
        ),
        (
            "go byte slice",
            format!("hmacSecret := []byte(\"{}\")", tok(572)),
            tok(572),
        ),
        (
            "jjwt",
            format!(
                "Jwts.builder().signWith(Keys.hmacShaKeyFor(\"{}\".getBytes()))",
                tok(573)
            ),
            tok(573),
        ),
        (
            "ruby smtp",
            format!(
                "Net::SMTP.start('smtp.example.org', 587, 'example.org', 'bob', '{}', :plain)",
                pw(574)
            ),
            pw(574),
        ),
        (
            "reqwest",
            format!(
                "Client::new().get(url).bearer_auth(\"{}\").send().await?",
                tok(575)
            ),
            tok(575),
        ),
        (
            "reqwest",
            format!("  .basic_auth(\"bob\", Some(\"{}\"))", pw(576)),
            pw(576),
        ),
        (
            "resty",
            format!("client.R().SetAuthToken(\"{}\")", tok(577)),
            tok(577),
        ),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "msg := []byte(\"hello world, this is a test\")",
            "var key = []byte(name)",
            "req.bearer_auth(token)",
            ".basic_auth(\"bob\", None::<&str>)",
            "auth := smtp.PlainAuth(\"\", user, pass, host)",
            "Net::SMTP.start(host, port) do |smtp|",
            "Keys.hmacShaKeyFor(secret.getBytes())",
        ],
    );
}

/// Service configs that join a user and a password, hold a pre-shared key
/// or an application's salt, found by a fifth probe of 79 self-hosting
/// config lines (session 20).
#[test]
fn service_configs_pairs_and_ipsec_secrets() {
    let b64 = |n| format!("{}=", rs(n, B64, 43));
    check(&[
        (
            "sentinel",
            format!("sentinel auth-pass mymaster {}", pw(580)),
            pw(580),
        ),
        (
            "haproxy",
            format!("    stats auth admin:{}", pw(581)),
            pw(581),
        ),
        (
            "squid",
            format!(
                "cache_peer proxy.corp.io parent 3128 0 no-query login=bob:{}",
                pw(582)
            ),
            pw(582),
        ),
        (
            "postfix sasl_passwd",
            format!("[smtp.sendgrid.net]:587 apikey:{}", pw(583)),
            pw(583),
        ),
        (
            "postfix sasl_passwd",
            format!("[mail.corp.io]:25 bob@corp.io:{}", pw(584)),
            pw(584),
        ),
        ("neo4j", format!("NEO4J_AUTH=neo4j/{}", pw(585)), pw(585)),
        ("ipsec", format!(": PSK \"{}\"", pw(586)), pw(586)),
        (
            "ipsec",
            format!("%any 203.0.113.5 : PSK '{}'", pw(587)),
            pw(587),
        ),
        ("ipsec", format!("bob : EAP \"{}\"", pw(588)), pw(588)),
        ("ipsec", format!(": PSK 0s{}", b64(589)), b64(589)),
        (
            "salt",
            format!("$settings['hash_salt'] = '{}';", rs(599, URLSAFE, 43)),
            rs(599, URLSAFE, 43),
        ),
        (
            "salt",
            format!("        'salt' => '{}',", rs(600, HEX, 40)),
            rs(600, HEX, 40),
        ),
        (
            "salt",
            format!("SECURITY_SALT={}", rs(601, ALNUM, 32)),
            rs(601, ALNUM, 32),
        ),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "stats auth admin:${STATS_PASSWORD}",
            "stats uri /haproxy?stats",
            "cache_peer proxy.corp.io parent 3128 0 login=PASSTHRU",
            "relayhost = [smtp.sendgrid.net]:587",
            "NEO4J_AUTH=none",
            ": RSA server.key",
            "sentinel monitor mymaster redis-primary 6379 2",
            "salt_rounds = 10",
            "SALT_LENGTH = 16",
            "salt = os.urandom(16)",
            "salt = bcrypt.gensalt()",
            "salt: ${HASH_SALT}",
            "pub salt: [c_uchar; TLS_CIPHER_AES_GCM_128_SALT_SIZE],",
        ],
    );
}

/// Deploy and database-admin commands that a sixth probe of 72 command
/// lines found leaking (session 20).
#[test]
fn deploy_and_database_admin_commands() {
    let tok = |n| rs(n, ALNUM, 32);
    check(&[
        (
            "mongo",
            format!("db.changeUserPassword(\"app\", \"{}\")", pw(590)),
            pw(590),
        ),
        (
            "secret store pipe",
            format!("printf \"%s\" \"{}\" | podman secret create db -", pw(591)),
            pw(591),
        ),
        (
            "secret store pipe",
            format!("echo -n '{}' | docker secret create db_password -", pw(592)),
            pw(592),
        ),
        (
            "influx",
            format!("influx user password -n admin -p {}", pw(593)),
            pw(593),
        ),
        (
            "influx",
            format!("influx setup -u admin -p '{}' -o org -b bucket -f", pw(594)),
            pw(594),
        ),
        (
            "eas",
            format!(
                "eas secret:create --scope project --name API_KEY --value {}",
                tok(595)
            ),
            tok(595),
        ),
        (
            "pulumi",
            format!("pulumi config set dbPassword {}", pw(596)),
            pw(596),
        ),
        (
            "pulumi",
            format!("pulumi config set --secret apiToken '{}'", tok(597)),
            tok(597),
        ),
        (
            "httpie",
            format!("httpie --auth bob:{} api.corp.io", pw(598)),
            pw(598),
        ),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "influx setup -u admin -p",
            "pulumi config set aws:region us-east-1",
            "db.changeUserPassword(\"app\", passwordPrompt())",
            "echo hello | docker secret create greeting -",
            "eas secret:create --name API_KEY --value $API_KEY",
        ],
    );
}

/// Tool settings and CLI sessions a seventh probe of 44 lines found
/// leaking (session 20): Claude Code's `apiKeyHelper` echoing the key,
/// Kaggle's `kaggle.json`, Consul's and Nomad's ACL secret ids, password
/// managers' session keys, CI and deploy CLIs' token arguments.
#[test]
fn tool_sessions_acl_ids_and_ci_tokens() {
    let tok = |n| rs(n, ALNUM, 32);
    check(&[
        (
            "apiKeyHelper",
            format!("  \"apiKeyHelper\": \"echo {}\",", tok(610)),
            tok(610),
        ),
        (
            "apiKeyHelper",
            format!("{{\"apiKeyHelper\": \"printf '%s' '{}'\"}}", tok(611)),
            tok(611),
        ),
        (
            "kaggle",
            format!("{{\"username\":\"bob\",\"key\":\"{}\"}}", rs(612, HEX, 32)),
            rs(612, HEX, 32),
        ),
        (
            "consul",
            format!("SecretID:          {}", uuid(613)),
            uuid(613),
        ),
        ("nomad", format!("Secret ID   = {}", uuid(614)), uuid(614)),
        (
            "consul json",
            format!("{{\"AccessorID\": \"x\", \"SecretID\": \"{}\"}}", uuid(615)),
            uuid(615),
        ),
        (
            "1password",
            format!("export OP_SESSION_my={}", tok(616)),
            tok(616),
        ),
        (
            "bitwarden",
            format!("export BW_SESSION=\"{}==\"", rs(617, B64, 86)),
            rs(617, B64, 86),
        ),
        ("snyk", format!("snyk auth {}", uuid(618)), uuid(618)),
        ("codecov", format!("codecov -t {}", uuid(619)), uuid(619)),
        (
            "netlify",
            format!("netlify deploy --auth {} --prod", tok(620)),
            tok(620),
        ),
        (
            "modal",
            format!(
                "modal token set --token-id ak-x --token-secret as-{}",
                tok(621)
            ),
            tok(621),
        ),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "\"apiKeyHelper\": \"~/bin/get-key.sh\"",
            "\"apiKeyHelper\": \"echo $ANTHROPIC_API_KEY\"",
            "{\"username\":\"bob\",\"key\":\"value\"}",
            "SecretID: <redacted>",
            "export BW_SESSION=$(bw unlock --raw)",
            "snyk auth",
            "netlify deploy --auth $NETLIFY_AUTH_TOKEN --prod",
        ],
    );
}

/// Session 21's probe lists 11 and 12: a pre-signed URL's signature and
/// session token, a JSON Web Key's private members, and a REPL printing the
/// secret its prompt asked for (`>>> os.environ["DB_PASSWORD"]` ⏎ `'V'`).
#[test]
fn presigned_urls_jwk_private_members_and_repl_output() {
    let tok = |n| rs(n, ALNUM, 32);
    let url = |n| rs(n, URLSAFE, 43);
    check(&[
        (
            "s3 presigned",
            format!(
                "https://b.s3.amazonaws.com/f.zip?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature={}",
                rs(700, HEX, 64)
            ),
            rs(700, HEX, 64),
        ),
        (
            "s3 presigned in json",
            format!(
                "{{\"url\": \"https://b.s3.eu-west-1.amazonaws.com/k?X-Amz-Signature={}&X-Amz-Date=20260101T000000Z\"}}",
                rs(701, HEX, 64)
            ),
            rs(701, HEX, 64),
        ),
        (
            "s3 session token",
            format!(
                "https://b.s3.amazonaws.com/k?X-Amz-Security-Token=IQoJb3JpZ2luX2VjE{}%3D&X-Amz-Expires=60",
                rs(702, URLSAFE, 120)
            ),
            rs(702, URLSAFE, 120),
        ),
        (
            "gcs signed",
            format!(
                "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Expires=900&X-Goog-Signature={}",
                rs(703, HEX, 512)
            ),
            rs(703, HEX, 512),
        ),
        (
            "jwk ec d",
            format!(
                "{{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"{}\",\"d\":\"{}\"}}",
                url(704),
                url(705)
            ),
            url(705),
        ),
        (
            "jwk rsa p",
            format!("  \"p\": \"{}\",", rs(706, URLSAFE, 171)),
            rs(706, URLSAFE, 171),
        ),
        (
            "jwk rsa qi",
            format!("  \"qi\": \"{}\"", rs(707, URLSAFE, 171)),
            rs(707, URLSAFE, 171),
        ),
        (
            "jwk oct k",
            format!("{{\"kty\":\"oct\",\"k\":\"{}\",\"alg\":\"HS256\"}}", url(708)),
            url(708),
        ),
        (
            "python repl",
            format!(">>> os.environ[\"DB_PASSWORD\"]\n'{}'", pw(709)),
            pw(709),
        ),
        (
            "python repl getenv",
            format!(">>> os.getenv(\"STRIPE_SECRET_KEY\")\n'{}'", tok(710)),
            tok(710),
        ),
        (
            "ipython",
            format!(
                "In [2]: os.environ['AWS_SECRET_ACCESS_KEY']\nOut[2]: '{}'",
                rs(711, B64, 40)
            ),
            rs(711, B64, 40),
        ),
        (
            "django shell",
            format!(">>> settings.SECRET_KEY\n'django-insecure-{}'", tok(712)),
            tok(712),
        ),
        (
            "node repl",
            format!("> process.env.SESSION_SECRET\n'{}'", tok(713)),
            tok(713),
        ),
        (
            "irb",
            format!("irb(main):001> ENV[\"API_TOKEN\"]\n=> \"{}\"", tok(714)),
            tok(714),
        ),
        (
            "pry",
            format!("[1] pry(main)> ENV.fetch(\"GITHUB_TOKEN\")\n=> \"{}\"", tok(715)),
            tok(715),
        ),
        (
            "rails console",
            format!(
                "app(prod)> Rails.application.credentials.secret_key_base\n=> \"{}\"",
                rs(716, HEX, 128)
            ),
            rs(716, HEX, 128),
        ),
        (
            "iex",
            format!("iex(3)> System.get_env(\"DB_PASSWORD\")\n\"{}\"", pw(717)),
            pw(717),
        ),
    ]);
    check_table(
        &[],
        &[
            "https://b.s3.amazonaws.com/f.zip?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-SignedHeaders=host".into(),
            "X-Amz-Signature=<signature>".into(),
            format!("{{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"{}\",\"y\":\"{}\"}}", url(720), url(721)),
            format!("{{\"kty\":\"RSA\",\"n\":\"{}\",\"e\":\"AQAB\"}}", rs(722, URLSAFE, 342)),
            "{\"d\": \"M10 10 L20 20 Z\"}".into(),
            "{\"k\": \"short\"}".into(),
            ">>> os.environ[\"HOME\"]\n'/home/zed'".into(),
            ">>> settings.DEBUG\nTrue".into(),
            ">>> len(os.environ[\"API_TOKEN\"])\n40".into(),
            ">>> token_count\n'many'".into(),
            "> process.env.NODE_ENV\n'production'".into(),
            // A string ending in a secret's name, then the next member's
            // name: not a name and its value.
            "{\"command\":\"echo $PWD\",\"description\":\"print the directory\"}".into(),
            "{\"name\":\"DB_PASSWORD\",\"description\":\"the database password\"}".into(),
        ],
    );
    // The tuple form it resembles is still a name and its value.
    check(&[(
        "tuple",
        format!("os.environ.setdefault(\"DB_PASSWORD\", \"{}\")", pw(718)),
        pw(718),
    )]);
}

/// Session 21: the keys chain tooling and mobile signing take — an EVM
/// private key where Foundry, ethers, web3.py, viem and Hardhat take one,
/// a Solana keypair's 64 bytes or their base58, a Bitcoin WIF key named as
/// one, an RPC provider's key in its endpoint's path, an Apple
/// app-specific password given to `altool`/`notarytool`, and a recovery
/// phrase on the line under the label that names it.
#[test]
fn chain_tooling_and_mobile_signing_secrets() {
    const B58: &str = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
    let key = |n| rs(n, HEX, 64);
    // 64 numbers 0–255, comma-separated, as `solana-keygen` writes them.
    let bytes64 = |n| {
        rs(n, HEX, 128)
            .as_bytes()
            .chunks(2)
            .map(|c| u8::from_str_radix(std::str::from_utf8(c).unwrap_or("0"), 16).unwrap_or(0))
            .map(|b| b.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let wif = |n: u64| format!("{}{}", ["K", "L", "c"][n as usize % 3], rs(n, B58, 51));
    let lower4 = |n| {
        let s = rs(n, "abcdefghijklmnopqrstuvwxyz", 16);
        format!("{}-{}-{}-{}", &s[..4], &s[4..8], &s[8..12], &s[12..])
    };
    check(&[
        (
            "foundry",
            format!("cast send 0xAbC… \"transfer(address,uint256)\" 0x1 1 --rpc-url $RPC --private-key 0x{}", key(1)),
            key(1),
        ),
        (
            "foundry",
            format!("forge script script/Deploy.s.sol --broadcast --private-key={}", key(2)),
            key(2),
        ),
        (
            "ethers",
            format!("const wallet = new ethers.Wallet(\"0x{}\", provider);", key(3)),
            key(3),
        ),
        (
            "web3.py",
            format!("acct = Account.from_key('{}')", key(4)),
            key(4),
        ),
        (
            "viem",
            format!("const account = privateKeyToAccount(`0x{}`)", key(5)),
            key(5),
        ),
        (
            "hardhat",
            format!(
                "    sepolia: {{ url: RPC, accounts: [\"0x{}\", \"0x{}\"] }},",
                key(6),
                key(7)
            ),
            key(7),
        ),
        (
            "solana bytes",
            format!(
                "const payer = Keypair.fromSecretKey(Uint8Array.from([{}]));",
                bytes64(8)
            ),
            bytes64(8),
        ),
        (
            "solana bytes",
            format!("SOLANA_PRIVATE_KEY=[{}]", bytes64(9)),
            bytes64(9),
        ),
        (
            "solana base58",
            format!(
                "Keypair.fromSecretKey(bs58.decode(\"{}\"))",
                rs(10, B58, 88)
            ),
            rs(10, B58, 88),
        ),
        (
            "bitcoin wif",
            format!("bitcoin-cli importprivkey {} \"savings\" false", wif(11)),
            wif(11),
        ),
        ("bitcoin wif", format!("WIF: {}", wif(12)), wif(12)),
        (
            "rpc url",
            format!(
                "const RPC = \"https://eth-mainnet.g.alchemy.com/v2/{}\";",
                rs(13, URLSAFE, 32)
            ),
            rs(13, URLSAFE, 32),
        ),
        (
            "rpc url",
            format!("wss://mainnet.infura.io/ws/v3/{}", rs(14, HEX, 32)),
            rs(14, HEX, 32),
        ),
        (
            "rpc url",
            format!(
                "https://solitary-wispy-pond.solana-mainnet.quiknode.pro/{}/",
                rs(15, HEX, 40)
            ),
            rs(15, HEX, 40),
        ),
        (
            "rpc url",
            format!("https://rpc.ankr.com/eth/{}", rs(16, HEX, 64)),
            rs(16, HEX, 64),
        ),
        (
            "apple app-specific password",
            format!(
                "xcrun altool --upload-app -f App.ipa -u dev@example.com -p {}",
                lower4(17)
            ),
            lower4(17),
        ),
        (
            "apple app-specific password",
            format!(
                "xcrun notarytool submit App.zip --apple-id dev@example.com --team-id ABCDE12345 --password \"{}\" --wait",
                lower4(18)
            ),
            lower4(18),
        ),
        (
            "apple app-specific password",
            format!("app-specific password: {}", lower4(19)),
            lower4(19),
        ),
        (
            "apple app-specific password",
            format!("export APPLICATION_SPECIFIC_PASSWORD={}", lower4(20)),
            lower4(20),
        ),
        (
            "phrase under its label",
            format!(
                "Save this seed phrase and your BIP39 passphrase to recover your new keypair:\n{}",
                phrase(21, 12)
            ),
            phrase(21, 12),
        ),
        (
            "phrase under its label",
            format!("Recovery phrase:\n{}", phrase(22, 24)),
            phrase(22, 24),
        ),
        (
            "phrase under its label",
            format!("Write down your secret recovery words:\n  {}", phrase(23, 12)),
            phrase(23, 12),
        ),
    ]);
    // What looks like them and is not a secret: a transaction hash, a
    // contract constant, a key read from the environment, a placeholder
    // project id, an array that is not 64 bytes, a keychain reference, a
    // label with no phrase under it.
    check_table(
        &[],
        &[
            format!(
                "const tx = await provider.getTransaction(\"0x{}\");",
                key(30)
            ),
            format!("bytes32 constant DOMAIN_TYPEHASH = 0x{};", key(31)),
            "    sepolia: { url: RPC, accounts: [process.env.PRIVATE_KEY] },".into(),
            "cast send $TOKEN \"mint()\" --private-key $PRIVATE_KEY".into(),
            "const provider = new Wallet(process.env.DEPLOYER_KEY, provider);".into(),
            "https://mainnet.infura.io/v3/YOUR-PROJECT-ID".into(),
            "https://eth-mainnet.g.alchemy.com/v2/your-api-key".into(),
            "const key = [1, 2, 3, 4];".into(),
            "xcrun notarytool submit App.zip --keychain-profile AC_PASSWORD --wait".into(),
            "xcrun altool --upload-app -f App.ipa -u dev@example.com -p @keychain:AC_PASSWORD"
                .into(),
            "Recovery phrase:\nsee the wallet's settings page".into(),
            "The recovery phrase is stored offline.".into(),
        ],
    );
}

/// A bearer value with no digit: one random 40-character alphanumeric token
/// in about a thousand has none (`(52/62)^40`), and the rules that read a
/// bearer value required one (the varied corpus's side-by-side found one
/// such token left in 406). Random letters in both cases are taken; a word
/// or a camel-case name is not.
#[test]
fn bearer_tokens_without_a_digit() {
    let t = rs(61, LETTERS, 40);
    let u = rs(62, LETTERS, 24);
    let v = format!("{}.{}", rs(63, LETTERS, 20), rs(64, LETTERS, 12));
    assert!(!t.bytes().any(|b| b.is_ascii_digit()));
    check_table(
        &[
            (format!("Authorization: Bearer {t}"), t.clone()),
            (
                format!("curl -H \"Authorization: Bearer {u}\" https://api.example.com/v1/me"),
                u.clone(),
            ),
            (
                format!("headers = {{\"Authorization\": \"Bearer {t}\"}}"),
                t.clone(),
            ),
            (format!("use bearer {u} for the staging API"), u.clone()),
            (format!("Authorization: Bearer {v}"), v.clone()),
            (format!("das Passwort ist {t}"), t.clone()),
        ],
        &[
            "Authorization: Bearer accessTokenFromStorage".to_string(),
            "the API expects a Bearer authenticationHeaderValue".to_string(),
            "headers[\"Authorization\"] = \"Bearer \" + authenticationToken".to_string(),
            "Authorization: Bearer refreshTokenProviderService".to_string(),
        ],
    );
}

/// A value of 12–23 random letters (no digit) under a key, token or secret
/// name: a random 20-character alphanumeric key has no digit about one time
/// in thirty, a 12-character one about one in eight, and the generic value
/// test wanted a digit below 24 bytes. Mixed-case letters that do not read
/// as words are taken; a camel-case name is still a code name.
#[test]
fn key_values_of_random_letters() {
    let (a, b, c, d) = (
        rs(71, LETTERS, 12),
        rs(72, LETTERS, 16),
        rs(73, LETTERS, 20),
        rs(74, LETTERS, 23),
    );
    check_table(
        &[
            (format!("api_key = \"{a}\""), a.clone()),
            (format!("API_KEY={b}"), b.clone()),
            (format!("secret: {c}"), c.clone()),
            (format!("\"apiKey\": \"{d}\""), d.clone()),
            (format!("AWS_SECRET_ACCESS_KEY={c}"), c.clone()),
            (format!("access_token: {d}"), d.clone()),
            (format!("token={b}"), b.clone()),
        ],
        &[
            "api_key = \"MyApplicationKey\"".to_string(),
            "token = \"refreshTokenValue\"".to_string(),
            "secret: ClientSecretName".to_string(),
            "API_KEY=SomeServiceApiKey".to_string(),
            "\"apiKey\": \"defaultApiKeyPlaceholderName\"".to_string(),
        ],
    );
}

/// A quoted value with blanks in it, whose first word a key-assignment or
/// prose rule takes for a credential: the whole string to its closing quote
/// is the value (the words after the first leaked). Quoted with `\"` inside
/// a JSON string too (`check_table` also runs each text as a `tool_result`).
#[test]
fn quoted_values_with_blanks_run_to_the_closing_quote() {
    let (a, b, c) = (rs(81, ALNUM, 11), rs(82, ALNUM, 6), rs(83, ALNUM, 7));
    let p = format!("{a}9 {b} {c}");
    let dirty: Vec<(String, String)> = [
        format!("passphrase = \"{p}\""),
        format!("password: \"{p}\""),
        format!("my password is \"{p}\""),
        format!("client_secret = '{p}'"),
    ]
    .into_iter()
    .flat_map(|t| [(t.clone(), b.clone()), (t, c.clone())])
    .collect();
    check_table(
        &dirty,
        &[
            "password = \"Enter your password\"".to_string(),
            "secret: \"not set\"".to_string(),
        ],
    );
}

/// A session cookie given to curl's `-b`, credentials as `user / password`
/// after `are`, an EVM private key named in prose, one recovery code in
/// another provider's shape, and a PuTTY key's private lines.
#[test]
fn cookie_flags_key_pairs_recovery_codes_and_putty_keys() {
    let p = pw;
    let k = |n| rs(n, ALNUM, 24);
    let ppk = |a: &str, b: &str| {
        format!(
            "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: bob@laptop\nPublic-Lines: 1\nAAAAC3NzaC1lZDI1NTE5AAAAIHb0bW9ja2tleWZvcnRlc3Rz\nPrivate-Lines: 2\n{a}\n{b}\nPrivate-MAC: {}\n",
            rs(70, HEX, 64)
        )
    };
    let (l1, l2) = (rs(71, B64, 44), rs(72, B64, 24));
    check(&[
        (
            "curl -b",
            format!("curl -s -b 'session={}' https://geo.corp.io/me", k(60)),
            k(60),
        ),
        (
            "curl -b",
            format!(
                "curl -b \"_geo_sid={}; theme=dark\" https://geo.corp.io/",
                k(61)
            ),
            k(61),
        ),
        ("creds are", format!("creds are bob / {}", p(62)), p(62)),
        (
            "creds are",
            format!("the staging credentials are admin / {}", p(63)),
            p(63),
        ),
        (
            "private key 0x",
            format!("private key: 0x{}", rs(64, HEX, 64)),
            rs(64, HEX, 64),
        ),
        (
            "private key 0x",
            format!("my deployer's priv key is `0x{}`", rs(65, HEX, 64)),
            rs(65, HEX, 64),
        ),
        (
            "recovery code",
            format!("PIN 4921 and recovery code {}", k(66)),
            k(66),
        ),
        (
            "backup code",
            "my backup code is K7QX-2M9P".into(),
            "K7QX-2M9P".into(),
        ),
        ("putty key", ppk(&l1, &l2), l1.clone()),
        ("putty key", ppk(&l1, &l2), l2.clone()),
    ]);
    assert_no_findings(
        &scanner(),
        [
            "git checkout -b session-fix",
            "curl -b cookies.txt https://geo.corp.io/",
            "curl -b 'theme=dark' https://geo.corp.io/",
            "private key: ~/.ssh/id_ed25519",
            "the private key is 0x-prefixed hex",
            "tx hash: 0x364e857cd3ac5d86374722ca9a8c639c96d633c88ff1ee3150f0060b852ef0d1",
            "the creds are in the vault / see 1password",
            "the recovery code is invalid",
            "recovery code: HTTP-ERROR",
            "use a backup code instead",
            "Private-Lines: 2\nthe next lines are the key",
            "cmdkey /list",
            "cmdkey /add:fileserver /user:bob /pass",
            "schtasks /Create /TN nightly /TR sync.exe /RU CORP\\svc /RP *",
            "schtasks /Query /FO LIST /V",
            "PEPPER_ROUNDS=3",
        ],
    );
}
