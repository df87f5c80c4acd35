"""TLS certificates and SuperNode keys for a secure local deployment.

:func:`local_pki` makes what ``fgl deploy-local --secure`` needs on one machine: a private
certificate authority, a SuperLink certificate it signs for the loopback host, and one
ECDSA (NIST P-384) key pair per SuperNode in OpenSSH format, the format Flower's
``flower-supernode --auth-supernode-private-key`` and ``flwr supernode register`` read.
On real machines the same roles are filled by the operator's own CA and keys (see the
README); nothing here is meant for anything but localhost.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

VALID_DAYS = 2


@dataclass(frozen=True)
class LocalPKI:
    """Files of a local deployment's TLS and SuperNode authentication."""

    ca_cert: Path
    server_cert: Path
    server_key: Path
    node_keys: tuple[tuple[Path, Path], ...]  # (private, public) per SuperNode


def _write(path: Path, data: bytes, private: bool = False) -> Path:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)
    return path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def node_key_pair(folder: Path, name: str) -> tuple[Path, Path]:
    """A SuperNode's ECDSA P-384 key pair: ``(<name>, <name>.pub)`` in OpenSSH format."""
    key = ec.generate_private_key(ec.SECP384R1())
    private = _write(
        folder / name,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        ),
        private=True,
    )
    public = _write(
        folder / f"{name}.pub",
        key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        ),
    )
    return private, public


def local_pki(folder: Path, host: str, num_supernodes: int) -> LocalPKI:
    """A CA, a SuperLink certificate for ``host`` (and ``localhost``) and SuperNode keys,
    written into ``folder`` (private keys readable by the owner only)."""
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=VALID_DAYS)

    ca_key = ec.generate_private_key(ec.SECP384R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("fgl-flower local CA"))
        .issuer_name(_name("fgl-flower local CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA384())
    )

    server_key = ec.generate_private_key(ec.SECP384R1())
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    try:
        names.append(x509.IPAddress(ipaddress.ip_address(host)))
    except ValueError:
        names.append(x509.DNSName(host))
    server = (
        x509.CertificateBuilder()
        .subject_name(_name(host))
        .issuer_name(ca.subject)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA384())
    )

    pem = serialization.Encoding.PEM
    return LocalPKI(
        ca_cert=_write(folder / "ca.crt", ca.public_bytes(pem)),
        server_cert=_write(folder / "server.pem", server.public_bytes(pem)),
        server_key=_write(
            folder / "server.key",
            server_key.private_bytes(
                pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ),
            private=True,
        ),
        node_keys=tuple(node_key_pair(folder, f"supernode-{i}") for i in range(num_supernodes)),
    )
