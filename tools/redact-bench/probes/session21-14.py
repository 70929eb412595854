"""Session 21 leak probe list 14: list 13's classes in other spellings,
written after list 13's rules as a held-out check. Writes its cases as JSON
to argv[1]."""
import random, string, sys
from common import HEX, B58, pw, rv, write_cases
random.seed(2114)
WORDS = ('zoo zone youth young yellow year wrong write wrist wreck wrap worth world work wool wood wonder woman '
         'wolf witness wise wire winter wink wing wine window wild wife width').split()
T = [
 ('cast wallet address --private-key={HEX64}', None),
 ('forge create src/Token.sol:Token --rpc-url http://127.0.0.1:8545 --private-key "0x{HEX64}"', None),
 ('const signer = new Wallet(`0x{HEX64}`, provider)', None),
 ('wallet = Wallet("0x{HEX64}")', None),
 ('const acct = web3.eth.accounts.privateKeyToAccount("0x{HEX64}");', None),
 ('web3.eth.accounts.wallet.add("0x{HEX64}");', None),
 ('    accounts: [\n      "0x{HEX64}",\n      "0x{HEX64B}"\n    ]', None),
 ("accounts: ['{HEX64}']", None),
 ('SOLANA_PRIVATE_KEY=[{ARR64}]', None),
 ('const kp = Keypair.fromSecretKey(bs58.decode("{B58_88}"));', None),
 ('bitcoin-cli importprivkey {WIF} "savings" false', None),
 ('WIF: {WIF}', None),
 ('{WIF}', 'bitcoin-cli -testnet dumpprivkey tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx'),
 ('[{ARR64}]', 'cat /home/zed/.config/solana/devnet.json'),
 ('Recovery phrase:\n{MN24}', None),
 ('Write down your secret recovery words:\n  {MN12}', None),
 ('ALCHEMY_URL="https://arb-mainnet.g.alchemy.com/v2/{T32}"', None),
 ('wss://mainnet.infura.io/ws/v3/{HEX32}', None),
 ('https://smart-bold-pine.quiknode.pro/{HEX40}/', None),
 ('https://rpc.ankr.com/eth/{HEX64}', None),
 ('xcrun altool --validate-app -f App.ipa -t ios --username bob@corp.io --password {ASP}', None),
 ('xcrun notarytool history --apple-id bob@corp.io --password={ASP} --team-id ABCDE12345', None),
 ('app specific password = {ASP}', None),
 ('storePassword "{P}"\n            keyAlias "upload"\n            keyPassword "{P2}"', None),
]


def values():
    return {'P': pw(), 'P2': pw(), 'T32': rv(32), 'HEX32': rv(32, HEX), 'HEX40': rv(40, HEX), 'HEX64': rv(64, HEX),
            'HEX64B': rv(64, HEX), 'ARR64': ','.join(str(random.randint(0, 255)) for _ in range(64)),
            'B58_88': rv(88, B58), 'WIF': random.choice('KL') + rv(51, B58),
            'MN12': ' '.join(random.choice(WORDS) for _ in range(12)),
            'MN24': ' '.join(random.choice(WORDS) for _ in range(24)),
            'ASP': '-'.join(''.join(random.choice(string.ascii_lowercase) for _ in range(4)) for _ in range(4))}


write_cases(T, values, sys.argv[1])
