"""A private CA and a server certificate it signs, made for a test with the `cryptography` package that
requirements-s3.txt pins (.venv-s3: the program's own virtualenv does not carry it), in a subprocess.

The server certificate names `<host>` and `*.<host>`: the CLI reaches a virtual-hosted bucket as
`<bucket>.<host>` and checks that name against it (RFC 6125 wildcard, one label).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from s3_server import S3_VENV

_MAKE = r'''
import datetime, sys
from pathlib import Path
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

out, host, ca_name = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
now = datetime.datetime.now(datetime.timezone.utc)
def name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
def pem(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
ca_key = ec.generate_private_key(ec.SECP256R1())
ca = (x509.CertificateBuilder().subject_name(name(ca_name)).issuer_name(name(ca_name))
      .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
      .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
      .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
      .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                   data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                                   encipher_only=False, decipher_only=False), critical=True)
      .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
      .sign(ca_key, hashes.SHA256()))
key = ec.generate_private_key(ec.SECP256R1())
server = (x509.CertificateBuilder().subject_name(name(host)).issuer_name(ca.subject)
          .public_key(key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.SubjectAlternativeName([x509.DNSName(host), x509.DNSName("*." + host)]), critical=False)
          .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
          .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
          .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
out.mkdir(parents=True, exist_ok=True)
(out / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
(out / "server.pem").write_bytes(server.public_bytes(serialization.Encoding.PEM))
(out / "server.key").write_bytes(pem(key))
'''


@dataclass(frozen=True)
class Certificates:
    ca: Path          # the CA's certificate (PEM): what objectStore.caBundle holds
    server: Path      # the server certificate, signed by the CA
    key: Path         # its private key


def make_certificates(directory: Path, host: str, ca_name: str = "llm-serving test CA") -> Certificates:
    subprocess.run([str(S3_VENV / "bin" / "python"), "-c", _MAKE, str(directory), host, ca_name],
                   check=True, capture_output=True, text=True, timeout=60)
    return Certificates(directory / "ca.pem", directory / "server.pem", directory / "server.key")
