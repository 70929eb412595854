"""Session 21 leak probe list 13: wallets and chain tooling (Foundry,
Hardhat, ethers, web3.py, viem, Solana, Bitcoin Core, RPC URLs with the key
in the path) and mobile release signing (Gradle keystores, fastlane, Apple
app-specific passwords). Writes its cases as JSON to argv[1]."""
import random, string, sys
from common import HEX, B58, pw, rv, write_cases
random.seed(2113)
WORDS = ('abandon ability able about above absent absorb abstract absurd abuse access accident account accuse '
         'achieve acid acoustic acquire across act action actor actress actual adapt add addict address adjust').split()
T = [
 ('cast send 0x6B175474E89094C44Da98b954EedeAC495271d0F "transfer(address,uint256)" 0x1234567890123456789012345678901234567890 1 --private-key 0x{HEX64} --rpc-url $RPC', None),
 ('forge script script/Deploy.s.sol --broadcast --rpc-url $RPC --private-key {HEX64}', None),
 ('      accounts: ["0x{HEX64}"],', None),
 ('const wallet = new ethers.Wallet("0x{HEX64}", provider);', None),
 ('acct = Account.from_key("0x{HEX64}")', None),
 ("acct = w3.eth.account.from_key('{HEX64}')", None),
 ("const account = privateKeyToAccount('0x{HEX64}')", None),
 ('const payer = Keypair.fromSecretKey(Uint8Array.from([{ARR64}]));', None),
 ('[{ARR64}]', 'cat ~/.config/solana/id.json'),
 ('{WIF}', 'bitcoin-cli dumpprivkey bc1qxy2kgdygjrsqtzq2n0yrf2493p83kkfjhx0wlh'),
 ('MNEMONIC="{MN12}"', None),
 ('seed phrase: {MN12}', None),
 ('Save this seed phrase and your BIP39 passphrase to recover your new keypair:\n{MN12}', None),
 ('const RPC = "https://eth-mainnet.g.alchemy.com/v2/{T32}";', None),
 ('RPC_URL=https://mainnet.infura.io/v3/{HEX32}', None),
 ('curl https://polygon-mainnet.infura.io/v3/{HEX32} -X POST -d \'{{"jsonrpc":"2.0","method":"eth_blockNumber","id":1}}\'', None),
 ('https://api.etherscan.io/api?module=account&action=balance&address=0xde0B295669a9FD93d5F28D9Ec85E40f4cb697BAe&apikey={UP34}', None),
 ('ETHERSCAN_API_KEY={UP34}', None),
 ('storePassword={P}', None),
 ('keyPassword={P}', None),
 ('MYAPP_UPLOAD_STORE_PASSWORD={P}', None),
 ('            storePassword "{P}"', None),
 ('            keyPassword = "{P}"', None),
 ('MATCH_PASSWORD={P}', None),
 ('export FASTLANE_PASSWORD="{P}"', None),
 ('FASTLANE_APPLE_APPLICATION_SPECIFIC_PASSWORD={ASP}', None),
 ('xcrun altool --upload-app -f App.ipa -t ios -u bob@corp.io -p {ASP}', None),
 ('xcrun notarytool store-credentials "AC_PASSWORD" --apple-id bob@corp.io --team-id ABCDE12345 --password {ASP}', None),
 ('xcrun notarytool submit App.zip --apple-id bob@corp.io --password {ASP} --team-id ABCDE12345 --wait', None),
 ('app-specific password: {ASP}', None),
 ('EXPO_TOKEN={T}', None),
 ('eas build --platform ios --non-interactive  # EXPO_TOKEN={T}', None),
]


def values():
    return {'P': pw(), 'T': rv(40), 'T32': rv(32), 'HEX32': rv(32, HEX), 'HEX64': rv(64, HEX),
            'ARR64': ','.join(str(random.randint(0, 255)) for _ in range(64)),
            'WIF': random.choice('KL') + rv(51, B58), 'MN12': ' '.join(random.choice(WORDS) for _ in range(12)),
            'UP34': rv(34, string.ascii_uppercase + string.digits),
            'ASP': '-'.join(''.join(random.choice(string.ascii_lowercase) for _ in range(4)) for _ in range(4))}


write_cases(T, values, sys.argv[1])
