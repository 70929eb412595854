"""Session 20 leak probe list 6: writes its cases (line, secrets) as JSON to argv[1]."""
import json, random, string, sys
from common import pw, rv
random.seed(2004)
T=[
 "my password for the staging db is {P}",
 "the password's {P}",
 "pass is {P} btw",
 "pwd {P}",
 "creds are bob:{P}",
 "creds: bob / {P}",
 "user bob pw {P}",
 "login bob, password {P}",
 "username: bob password: {P}",
 "u: bob p: {P}",
 "here's the token, {T}",
 "use this token {T}",
 "token = {T} (expires tomorrow)",
 "I generated a key: {T}",
 "API key → {T}",
 "the secret is \"{P}\"",
 "it's {P} — the admin password",
 "admin/{P}",
 "root:{P}",
 "ssh root@10.0.0.5 (password {P})",
 "ssh bob@host with password {P}",
 "the sudo password is {P}",
 "sudo pw: {P}",
 "wifi: HomeNet / {P}",
 "mot de passe : {P}",
 "le mot de passe est {P}",
 "Passwort: {P}",
 "das Passwort lautet {P}",
 "contraseña: {P}",
 "la contraseña es {P}",
 "senha: {P}",
 "a senha é {P}",
 "пароль: {P}",
 "пароль от базы {P}",
 "密码：{P}",
 "密码是 {P}",
 "パスワード：{P}",
 "パスワードは {P} です",
 "비밀번호: {P}",
 "hasło: {P}",
 "wachtwoord: {P}",
 "lösenord: {P}",
 "şifre: {P}",
 "parola: {P}",
 "κωδικός: {P}",
 "סיסמה: {P}",
 "كلمة المرور: {P}",
 "पासवर्ड: {P}",
 "API-Schlüssel: {T}",
 "clé API : {T}",
 "clave de API: {T}",
 "токен: {T}",
 "APIキー: {T}",
 "令牌：{T}",
 "Token de acceso: {T}",
 "jeton : {T}",
 "the OTP secret is {B32}",
 "TOTP secret: {B32}",
 "otpauth://totp/GitHub:bob?secret={B32}&issuer=GitHub",
 "2FA seed {B32}",
 "google authenticator key: {B32S}",
 "security answer: {P}",
 "PIN code 4921",
 "card 4111 1111 1111 1111 exp 12/28 cvv 123",
 "SSN 123-45-6789",
 "passcode: {P}",
 "unlock code {P}",
 "master password: {P}",
 "vault password {P}",
 "keepass master pw {P}",
 "encryption passphrase: {P}",
 "the zip password is {P}",
 "pdf password {P}",
]
out=[]
for t in T:
    vals={'P':pw(),'T':rv(32),'B32':rv(32,string.ascii_uppercase+'234567'),'B32S':' '.join(rv(4,'abcdefghijklmnopqrstuvwxyz234567') for _ in range(8))}
    line=t.format(**vals)
    secrets=[v for k,v in vals.items() if '{'+k+'}' in t]
    if not secrets:
        if '4111' in t: secrets=['4111 1111 1111 1111']
        elif 'SSN' in t: secrets=['123-45-6789']
        elif 'PIN' in t: secrets=['4921']
    out.append((line,secrets))
json.dump(out, open(sys.argv[1],'w'),ensure_ascii=False)
print(len(out))
