"""Session 21 leak probe list 11: HTTP headers and logged URLs, connection
strings, key material, REPL and shell output, and the output of
secret-generating or secret-printing commands (a case with a third element
is a command and its output: check.py runs it as a Bash tool_use and its
tool_result). Writes its cases as JSON to argv[1]."""
import random, string, sys
from common import HEX, URLSAFE, pw, rv, write_cases
random.seed(2111)
B64 = string.ascii_letters + string.digits + '+/'
T = [
 # HTTP request headers as logged or pasted from devtools
 ('X-API-Key: {T}', None),
 ('x-api-key: {T}', None),
 ('Api-Key: {T}', None),
 ('X-Auth-Token: {T}', None),
 ('PRIVATE-TOKEN: {T20}', None),
 ('X-Vault-Token: hvs.{T}', None),
 ('Ocp-Apim-Subscription-Key: {HEX32}', None),
 ('X-Goog-Api-Key: {T}', None),
 ('Cookie: sessionid={T}; csrftoken={T24}', None),
 ('Set-Cookie: session={LONG}; Path=/; HttpOnly; Secure', None),
 ('-H "X-API-Key: {T}"', None),
 ("curl -H 'Authorization: Token {HEX40}' https://api.corp.io/v1/items", None),
 ('Authorization: Basic {BASIC}', None),
 ('> Authorization: Bearer {T}', None),
 ('DEBUG:urllib3.connectionpool:https://api.corp.io:443 "GET /v2/items?api_key={T} HTTP/1.1" 200 512', None),
 ('GET https://maps.corp.io/geocode/json?address=Berlin&key={T}', None),
 ('https://graph.corp.io/me?access_token={T}', None),
 ('https://bucket.s3.amazonaws.com/f.zip?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature={HEX64}', None),
 ('https://acct.blob.core.windows.net/c/f.txt?sv=2022-11-02&ss=b&srt=o&sp=r&se=2026-12-31T00:00:00Z&st=2026-01-01T00:00:00Z&spr=https&sig={SIG}', None),
 ('wss://stream.corp.io/socket?token={T}', None),
 ('https://hooks.corp.io/trigger?secret={T}', None),
 ('redirect_uri=https%3A%2F%2Fapp.io%2Fcb&client_id=app&client_secret={T}', None),
 # connection strings
 ('Server=tcp:db1.database.windows.net,1433;Initial Catalog=app;User ID=bob;Password={P};Encrypt=True;', None),
 ('"ConnectionStrings": {{ "Default": "Host=db;Database=app;Username=app;Password={P}" }}', None),
 ('jdbc:postgresql://db:5432/app?user=app&password={P}&ssl=true', None),
 ('jdbc:sqlserver://db:1433;databaseName=app;user=sa;password={P};', None),
 ('DRIVER={{ODBC Driver 18 for SQL Server}};SERVER=db;DATABASE=app;UID=sa;PWD={P}', None),
 ('redis://:{T}@cache.corp.io:6379/0', None),
 ('amqp://app:{P}@mq.corp.io:5672/vhost', None),
 ('mongosh "mongodb+srv://cluster0.x.mongodb.net/app" --username app --password {P}', None),
 ('mysqldump -u root -p{P} app > app.sql', None),
 ('PGPASSWORD={P} psql -h db -U app app', None),
 ('redis-cli -h cache -a {T} ping', None),
 ('sqlcmd -S db -U sa -P {P} -Q "select 1"', None),
 ('Data Source=db;User Id=app;Password={P};', None),
 # key material and app secrets
 ('PrivateKey = {WG}', None),
 ('AGE-SECRET-KEY-1{AGE}', None),
 ('secret_key_base: {HEX128}', None),
 ('config :app, AppWeb.Endpoint, secret_key_base: "{T64}"', None),
 ('NEXTAUTH_SECRET={T}', None),
 ('"d": "{JWKD}",', None),
 ('JWT_SECRET: {T}', None),
 ('SESSION_SECRET="{T}"', None),
 ('ENCRYPTION_KEY={HEX64}', None),
 ('SIGNING_KEY = "{T}"', None),
 # REPL and shell output
 ('>>> os.environ["DB_PASSWORD"]\n\'{P}\'', None),
 ('>>> settings.SECRET_KEY\n\'{DJ}\'', None),
 ("> process.env.SESSION_SECRET\n'{T}'", None),
 ('irb(main):001> ENV["API_TOKEN"]\n=> "{T}"', None),
 ('"Env": [\n    "POSTGRES_PASSWORD={P}",\n    "PATH=/usr/local/bin"\n]', None),
 ('      POSTGRES_PASSWORD:  {P}', None),
 ('Environment=API_TOKEN={T}', None),
 # a command and its output
 ('{HEX64}', 'python3 -c "import secrets; print(secrets.token_hex(32))"'),
 ('{URL43}', 'python -c \'import secrets; print(secrets.token_urlsafe(32))\''),
 ('{B64_44}', 'head -c 32 /dev/urandom | base64'),
 ('{HEX64}', "node -e \"console.log(require('crypto').randomBytes(32).toString('hex'))\""),
 ('{WG}', 'wg genkey'),
 ('{WG}', 'wg genkey | tee privatekey | wg pubkey > publickey && cat privatekey'),
 ('{HEX128}', 'bin/rails secret'),
 ('{T64}', 'mix phx.gen.secret'),
 ('base64:{B64_44}', 'php artisan key:generate --show'),
 ('{B64_44}', 'gpg --gen-random --armor 1 32'),
 ('{T}', 'printenv API_TOKEN'),
 ('{P}', 'echo $DB_PASSWORD'),
 ('{P}', 'echo "$POSTGRES_PASSWORD"'),
 ('protocol=https\nhost=github.com\nusername=bob\npassword={T}', 'printf "protocol=https\\nhost=github.com\\n" | git credential fill'),
 ('{P}', 'keyring get smtp bob'),
 ('{P}', 'secret-tool lookup service smtp user bob'),
 ('{T}', 'jq -r .token ~/.config/app/credentials.json'),
 ('{T}', 'docker exec api printenv SECRET_TOKEN'),
 ('{T}', 'kubectl exec deploy/api -- printenv API_TOKEN'),
 ('{P}', 'systemd-ask-password "Disk passphrase:"'),
 ('{T}', 'cat ~/.config/hub'),
 ('{T}', 'az keyvault secret show --vault-name kv --name api-token --query value -o tsv'),
 ('{T}', 'aws ssm get-parameter --name /app/token --with-decryption --query Parameter.Value --output text'),
 ('{T}', 'fly ssh console -C "printenv API_TOKEN"'),
]


def b64(n):
    return rv(n, B64)




def values():
    return {'P': pw(), 'T': rv(32), 'T20': rv(20), 'T24': rv(24), 'T64': rv(64), 'HEX32': rv(32, HEX),
            'HEX40': rv(40, HEX), 'HEX64': rv(64, HEX), 'HEX128': rv(128, HEX), 'LONG': rv(96, URLSAFE),
            'BASIC': __import__('base64').b64encode(('bob:' + pw()).encode()).decode(),
            'SIG': rv(43, string.ascii_letters + string.digits) + '%3D',
            'WG': b64(43)[:42] + random.choice('AEIMQUYcgkosw048') + '=',
            'AGE': rv(58, 'QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L'),
            'JWKD': rv(43, URLSAFE), 'DJ': 'django-insecure-' + rv(50, string.ascii_lowercase + string.digits + '!@#%^&*(-_=+)'),
            'URL43': rv(43, URLSAFE), 'B64_44': b64(43) + '='}


write_cases(T, values, sys.argv[1])
