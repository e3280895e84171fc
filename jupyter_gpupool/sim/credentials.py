"""What lets a client into a simulated cluster: a bearer token, a TLS certificate, a kubeconfig.

The cluster serves HTTPS, not HTTP, because kubectl (client-go) reads a kubeconfig's credentials
only when the server's URL is ``https``: over plain HTTP it sends no token at all. Each cluster
makes a certificate authority of its own, signs one server certificate for 127.0.0.1 and
``localhost`` with it, and forgets the authority's key, so the authority vouches for nothing else.
The kubeconfig carries the authority's certificate (``certificate-authority-data``) and the token,
so every client that reads it verifies the server and sends the token, as with a real cluster.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import ipaddress
import os
import secrets
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

VALIDITY = datetime.timedelta(days=365)


@dataclass(frozen=True)
class TLSIdentity:
    """The server's certificate and key, and the certificate of the authority that signed it."""

    ca_pem: str
    cert_pem: str
    key_pem: str

    def server_context(self) -> ssl.SSLContext:
        """A server-side TLS context; the key touches the disk only for the moment ``ssl`` needs
        a file to load it from, in a directory only this user can read."""
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory(prefix="gpupool-sim-tls-") as tmp:
            cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert.write_text(self.cert_pem)
            write_private(key, self.key_pem)
            ctx.load_cert_chain(cert, key)
        return ctx

    def client_context(self) -> ssl.SSLContext:
        """A client-side TLS context that trusts this server (for raw HTTP clients)."""
        return ssl.create_default_context(cadata=self.ca_pem)


def new_tls_identity(hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> TLSIdentity:
    """A fresh authority and a server certificate for ``hosts`` (IP addresses or DNS names)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    begin, end = now - datetime.timedelta(minutes=5), now + VALIDITY  # some clock skew
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, f"gpupool-sim CA {secrets.token_hex(4)}")]
    )
    none = dict(
        content_commitment=False,
        data_encipherment=False,
        key_agreement=False,
        encipher_only=False,
        decipher_only=False,
    )
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(begin)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                key_encipherment=False,
                **none,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    ca_ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpupool-sim")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(begin)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=False,
                crl_sign=False,
                key_encipherment=False,
                **none,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return TLSIdentity(
        ca_pem=ca.public_bytes(pem).decode(),
        cert_pem=cert.public_bytes(pem).decode(),
        key_pem=key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode(),
    )


def new_token() -> str:
    """A bearer token: 32 random bytes, URL-safe."""
    return secrets.token_urlsafe(32)


def kubeconfig_text(url: str, token: str, ca_pem: str, name: str = "gpupool-sim") -> str:
    """A kubeconfig for the cluster at ``url``, trusting ``ca_pem``, whose user holds ``token``."""
    ca_data = base64.b64encode(ca_pem.encode()).decode()
    cluster = {"server": url, "certificate-authority-data": ca_data}
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": cluster}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [
                {"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}
            ],
            "current-context": name,
            "preferences": {},
        },
        sort_keys=False,
    )


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by this user only (mode 0600).

    A kubeconfig holds the token that lets its reader run commands on this machine. The text is
    written beside the target and renamed over it, so the file is never readable by others, not
    even for a moment, and an existing file's wider mode or a planted symlink is replaced, not
    used.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _current(kubeconfig: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The current context's cluster and user entries."""
    doc = yaml.safe_load(Path(kubeconfig).read_text()) or {}
    context = {c.get("name"): c.get("context") or {} for c in doc.get("contexts") or []}.get(
        doc.get("current-context"), {}
    )
    clusters = {c.get("name"): c.get("cluster") or {} for c in doc.get("clusters") or []}
    users = {u.get("name"): u.get("user") or {} for u in doc.get("users") or []}
    return clusters.get(context.get("cluster"), {}), users.get(context.get("user"), {})


def sim_auth_headers(kubeconfig: str | os.PathLike[str]) -> dict[str, str]:
    """The ``Authorization`` header for raw HTTP requests (urllib, tornado) to a simulated
    cluster, read from the kubeconfig it wrote."""
    token = _current(kubeconfig)[1].get("token")
    if not token:
        raise ValueError(f"{kubeconfig}: the current context's user has no token")
    return {"Authorization": f"Bearer {token}"}


def sim_ssl_context(kubeconfig: str | os.PathLike[str]) -> ssl.SSLContext:
    """A TLS context that trusts the simulated cluster of ``kubeconfig``, for raw HTTP requests
    (``urllib.request.urlopen(..., context=...)``, tornado's ``ssl_options=``)."""
    ca = _current(kubeconfig)[0].get("certificate-authority-data")
    if not ca:
        raise ValueError(f"{kubeconfig}: the current context's cluster has no certificate")
    return ssl.create_default_context(cadata=base64.b64decode(ca).decode())
