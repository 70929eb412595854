import random, string, json, sys
random.seed(2007)
def rv(n=24, alpha=string.ascii_letters+string.digits):
    while True:
        s=''.join(random.choice(alpha) for _ in range(n))
        if any(c.isdigit() for c in s) and any(c.isalpha() for c in s): return s
def pw(): return random.choice(['Summer','Falcon','Quartz','Maple','Orbit'])+str(random.randint(10,999))+random.choice('!#&*')+rv(3)
T=[
 '"Env": [\n    "POSTGRES_PASSWORD={P}",\n    "PATH=/usr/bin"\n]',
 '      POSTGRES_PASSWORD:  {P}',
 '    Environment:\n      DB_PASSWORD:  {P}',
 '"db_password": {{\n      "sensitive": true,\n      "type": "string",\n      "value": "{P}"\n    }}',
 '"attributes": {{ "password": "{P}", "username": "app" }}',
 'gcloud sql users set-password root --host=% --instance=db --password={P}',
 'aws rds create-db-instance --db-instance-identifier db --master-username admin --master-user-password {P}',
 'aws rds modify-db-instance --db-instance-identifier db --master-user-password \'{P}\'',
 'az sql server create -n srv -g rg -u admin -p {P}',
 'az sql server create --admin-user admin --admin-password "{P}"',
 'mysqladmin -u root password {P}',
 'mysqladmin -u root -p\'{P}\' status',
 'rabbitmqctl add_user bob {P}',
 'rabbitmqctl change_password bob {P}',
 'db.createUser({{user: "app", pwd: "{P}", roles: ["readWrite"]}})',
 'db.changeUserPassword("app", "{P}")',
 'kubectl create secret docker-registry regcred --docker-server=r.io --docker-username=bob --docker-password={P}',
 'helm repo add private https://charts.corp.io --username bob --password {P}',
 'gh secret set API_TOKEN --body {T}',
 'gh secret set API_TOKEN -b"{T}"',
 'vault kv put secret/db password={P}',
 'vault write auth/userpass/users/bob password={P}',
 'aws ssm put-parameter --name /db/pw --type SecureString --value {P}',
 'aws secretsmanager create-secret --name db --secret-string \'{{"password":"{P}"}}\'',
 'op item create --category login title=db password={P}',
 'bw get password github\n{P}',
 'echo "{P}" | docker login -u bob --password-stdin',
 'echo {T} | gh auth login --with-token',
 'printf "%s" "{P}" | podman secret create db -',
 'influx user password -n admin -p {P}',
 'influx setup -u admin -p {P} -o org -b bucket -f',
 'createuser app && psql -c "ALTER ROLE app WITH PASSWORD \'{P}\'"',
 'dokku config:set app SECRET_KEY={T}',
 'caprover deploy --appToken {T}',
 'railway variables --set "API_KEY={T}"',
 'netlify env:set API_KEY {T}',
 'wrangler secret put API_KEY <<< "{T}"',
 'supabase secrets set STRIPE_KEY={T}',
 'firebase functions:config:set stripe.key="{T}"',
 'eas secret:create --name API_KEY --value {T}',
 'kamal secrets: KAMAL_REGISTRY_PASSWORD={P}',
 'flyctl secrets set DB_PASSWORD={P}',
 'heroku config:set DATABASE_PASSWORD={P} -a app',
 'az webapp config appsettings set --settings DB_PASSWORD={P}',
 'gcloud run deploy api --set-env-vars DB_PASSWORD={P}',
 'aws lambda update-function-configuration --function-name f --environment "Variables={{DB_PASSWORD={P}}}"',
 'docker service create --env DB_PASSWORD={P} app',
 'docker run -e "DB_PASSWORD={P}" app',
 'docker run --env API_KEY={T} app',
 'podman run -e MYSQL_ROOT_PASSWORD={P} mysql',
 'kubectl set env deployment/api DB_PASSWORD={P}',
 'ansible-playbook site.yml -e "db_password={P}"',
 'ansible all -m user -a "name=bob password={P}"',
 'terraform apply -var "db_password={P}"',
 'terraform apply -var=db_password={P}',
 'TF_VAR_db_password={P} terraform apply',
 'pulumi config set --secret dbPassword {P}',
 'pulumi config set dbPassword {P}',
 'sops --set \'["db"]["password"] "{P}"\' secrets.yaml',
 'git config --global credential.helper store && echo "https://bob:{P}@github.com" > ~/.git-credentials',
 'curl -X POST -H "Content-Type: application/json" -d \'{{"username":"bob","password":"{P}"}}\' https://api.corp.io/login',
 'curl --data-urlencode "password={P}" https://x',
 'curl -F "password={P}" https://x',
 'http -a bob:{P} GET api.corp.io',
 'httpie --auth bob:{P} api.corp.io',
 'xh -a bob:{P} api.corp.io',
 'wget --http-password={P} https://x',
 'aria2c --http-passwd={P} https://x',
 'svn checkout https://svn.corp.io/r --username bob --password {P}',
 'hg clone https://bob:{P}@hg.corp.io/r',
 'rclone config create remote webdav url https://x user bob pass {P}',
 'restic -r s3:s3.amazonaws.com/bucket --password-command "echo {P}" snapshots',
]
out=[]
for t in T:
    vals={'P':pw(),'T':rv(32)}
    line=t.format(**vals)
    secrets=[v for k,v in vals.items() if '{'+k+'}' in t]
    out.append((line,secrets))
json.dump(out, open(sys.argv[1],'w'))
print(len(out))
