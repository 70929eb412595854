"""Session 20 leak probe list 10: writes its cases (line, secrets) as JSON to argv[1]."""
import json, random, string, sys
from common import pw, rv
random.seed(2008)
T=[
 '{{\n  "mcpServers": {{\n    "github": {{\n      "command": "npx",\n      "env": {{ "GITHUB_PERSONAL_ACCESS_TOKEN": "{T}" }}\n    }}\n  }}\n}}',
 '"env": {{ "BRAVE_API_KEY": "{T}" }}',
 '"env": {{ "SLACK_BOT_TOKEN": "{T}", "SLACK_TEAM_ID": "T0123" }}',
 '"headers": {{ "Authorization": "Bearer {T}" }}',
 '"apiKeyHelper": "echo {T}"',
 '{{"models": [{{"provider": "openai", "apiKey": "{T}"}}]}}',
 'aider --openai-api-key {T}',
 'aider --anthropic-api-key {T}',
 'wandb login {HEX40}',
 '{{"username":"bob","key":"{HEX32}"}}',
 'modal token set --token-id ak-{T20} --token-secret as-{T20}',
 'vercel --token {T24} deploy',
 'netlify deploy --auth {T} --prod',
 'firebase deploy --token "1//{T}"',
 'cf login -a api.cf.io -u bob -p {P}',
 'oc login --token={T} --server=https://api.ocp.io:6443',
 'kubectl config set-credentials bob --token={T}',
 'kubectl --token={T} get pods',
 'argocd login argocd.corp.io --username admin --password {P}',
 'vault login -method=userpass username=bob password={P}',
 'SecretID:          {UUID}',
 'Secret ID   = {UUID}',
 'ngrok config add-authtoken {T}',
 'ngrok authtoken {T}',
 'cloudflared tunnel run --token {LONG}',
 'doctl auth init -t dop_v1_{HEX64}',
 'scw init secret-key={UUID}',
 'hcloud context create prod --token {T64}',
 'linode-cli --token {HEX64} linodes list',
 'terraform login output: "token": "{T}.atlasv1.{T60}"',
 'op signin --raw\n{T}',
 'export OP_SESSION_my={T}',
 'export BW_SESSION="{B64}"',
 'twilio login --auth-token {HEX32}',
 'stripe login --api-key sk_test_{T24}',
 'sentry-cli login --auth-token {HEX64}',
 'codecov -t {UUID}',
 'snyk auth {UUID}',
 'npm config set //npm.pkg.github.com/:_authToken={T}',
 'pip config set global.index-url https://bob:{P}@pypi.corp.io/simple',
 'gcloud auth print-identity-token\n{JWT}',
 'az account get-access-token --query accessToken -o tsv\n{JWT}',
 'aws sts get-session-token',
 'aws ecr get-login-password | docker login --username AWS --password-stdin x.dkr.ecr.us-east-1.amazonaws.com',
]
def jwt(): return 'eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJ'+rv(60)+'.'+rv(86,string.ascii_letters+string.digits+'_-')
out=[]
for t in T:
    vals={'P':pw(),'T':rv(32),'T20':rv(20),'T24':rv(24),'T60':rv(60),'T64':rv(64),'HEX32':rv(32,'0123456789abcdef'),'HEX40':rv(40,'0123456789abcdef'),'HEX64':rv(64,'0123456789abcdef'),
      'UUID':'%08x-%04x-4%03x-a%03x-%012x'%(random.getrandbits(32),random.getrandbits(16),random.getrandbits(12),random.getrandbits(12),random.getrandbits(48)),
      'LONG':'eyJhIjoi'+rv(120),'B64':rv(80,string.ascii_letters+string.digits+'+/')+'==','JWT':jwt()}
    line=t.format(**vals)
    secrets=[v for k,v in vals.items() if '{'+k+'}' in t]
    out.append((line,secrets))
json.dump(out, open(sys.argv[1],'w'))
print(len(out))
