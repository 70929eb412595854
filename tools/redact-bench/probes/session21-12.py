"""Session 21 leak probe list 12: list 11's classes in other spellings,
written after list 11's rules as a held-out check (other headers, query
parameters, REPLs and commands). Writes its cases as JSON to argv[1]."""
import random, string, sys
from common import HEX, URLSAFE, pw, rv, write_cases
random.seed(2112)
T = [
 ('X-Api-Token: {T}', None),
 ('X-Access-Token: {T}', None),
 ('X-RapidAPI-Key: {HEX40}', None),
 ('X-Figma-Token: {T}', None),
 ('apikey: {T}', None),
 ("-H 'X-Auth-Token: {T}'", None),
 ('https://api.corp.io/v1/search?q=berlin&apiKey={T}', None),
 ('https://api.corp.io/export?auth_token={T}&format=csv', None),
 ('https://ci.corp.io/job/build?token={T}', None),
 ('{{"url": "https://b.s3.eu-west-1.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={HEX64}"}}', None),
 ('https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=sa%40p.iam.gserviceaccount.com%2F20260101%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20260101T000000Z&X-Goog-Expires=900&X-Goog-SignedHeaders=host&X-Goog-Signature={HEX512}', None),
 ('https://b.s3.amazonaws.com/k?X-Amz-Security-Token={STS}&X-Amz-Signature={HEX64}', None),
 ('  "p": "{P171}",\n  "q": "{Q171}",', None),
 ('{{"kty":"oct","k":"{K43}","alg":"HS256"}}', None),
 ('{{"kty":"OKP","crv":"Ed25519","x":"{X43}","d":"{D43}"}}', None),
 ('>>> os.getenv("STRIPE_SECRET_KEY")\n\'{T}\'', None),
 ("In [2]: os.environ['AWS_SECRET_ACCESS_KEY']\nOut[2]: '{AWS}'", None),
 ('[1] pry(main)> ENV.fetch("GITHUB_TOKEN")\n=> "{T}"', None),
 ('app(prod)> Rails.application.credentials.secret_key_base\n=> "{HEX128}"', None),
 ('iex(3)> System.get_env("DB_PASSWORD")\n"{P}"', None),
 ('> process.env["API_KEY"]\n\'{T}\'', None),
 ('>>> app.config["SECRET_KEY"]\n\'{T}\'', None),
 ('{B64_44}', "python3 -c 'import os,base64; print(base64.b64encode(os.urandom(32)).decode())'"),
 ('{HEX64}', "ruby -rsecurerandom -e 'puts SecureRandom.hex(32)'"),
 ('{T24}', 'tr -dc A-Za-z0-9 </dev/urandom | head -c 24; echo'),
 ('{B64_44}', 'dd if=/dev/urandom bs=32 count=1 2>/dev/null | base64'),
 ('{T}', 'printenv OPENAI_API_KEY'),
 ('{T}', 'echo ${GITLAB_TOKEN}'),
 ('{T}', 'docker compose exec web printenv DJANGO_SECRET_KEY'),
 ('{P}', "ssh prod 'echo $DB_PASS'"),
 ('{T}', "jq -r '.api_key' config.json"),
 ('{P}', 'jq -r .password creds.json'),
 ('{T}', 'cat ~/.config/gcloud/application_default_credentials.json | jq -r .refresh_token'),
 ('{{\n  "auths": {{\n    "ghcr.io": {{ "auth": "{BASIC}" }}\n  }}\n}}', 'cat ~/.docker/config.json'),
 ('{T64}', 'mix phx.gen.secret 64'),
 ('{WG}', 'umask 077 && wg genkey'),
]


def values():
    return {'P': pw(), 'T': rv(32), 'T24': rv(24), 'T64': rv(64), 'HEX40': rv(40, HEX), 'HEX64': rv(64, HEX),
            'HEX128': rv(128, HEX), 'HEX512': rv(512, HEX), 'STS': 'IQoJb3JpZ2luX2VjE' + rv(200, URLSAFE) + '%3D',
            'P171': rv(171, URLSAFE), 'Q171': rv(171, URLSAFE), 'K43': rv(43, URLSAFE), 'X43': rv(43, URLSAFE),
            'D43': rv(43, URLSAFE), 'AWS': rv(40, string.ascii_letters + string.digits + '+/'),
            'B64_44': rv(43, string.ascii_letters + string.digits + '+/') + '=',
            'BASIC': __import__('base64').b64encode(('bob:' + pw()).encode()).decode(),
            'WG': rv(42, string.ascii_letters + string.digits + '+/') + random.choice('AEIMQUYcgkosw048') + '='}


write_cases(T, values, sys.argv[1], public=('X43',))
