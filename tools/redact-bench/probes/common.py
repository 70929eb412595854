"""Helpers the probe generators share. Each list seeds the module-level
`random` generator first, so its values are the same on every run."""
import random
import string


def rv(n=24, alpha=string.ascii_letters + string.digits):
    """A random value of `n` bytes from `alpha`, holding a letter and a digit."""
    while True:
        s = "".join(random.choice(alpha) for _ in range(n))
        if any(c.isdigit() for c in s) and any(c.isalpha() for c in s):
            return s


def pw():
    """A password the way people pick one: a word, digits, a symbol, a tail."""
    return (random.choice(["Summer", "Falcon", "Quartz", "Maple", "Orbit"])
            + str(random.randint(10, 999)) + random.choice("!#&*") + rv(3))
