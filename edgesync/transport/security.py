"""CURVE encryption and authentication for the coordinator's and clients' sockets (ZeroMQ's own).

Every party has a key pair made by `edgesync keys` (`zmq.auth.create_certificates`): NAME.key holds
the public key, NAME.key_secret the public and the secret key; `set_up_keys` also copies each
client's NAME.key into DIR/allow, the coordinator's allow-list folder. The coordinator's ROUTER is a CURVE
server with its secret key; a ZAP handler (`zmq.auth.thread.ThreadAuthenticator`, on the
coordinator's own zmq.Context) admits only clients whose public key is a .key file in the allow-list
folder, and logs every refusal with the client's address and key. A client's DEALER needs its own
key pair and the coordinator's public key (which also authenticates the coordinator to the client).
Everything after the handshake is encrypted.

Without keys both sides speak plain TCP, for one machine only: anyone who reaches the port can join.
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils import z85

log = logging.getLogger("edgesync.security")

PUBLIC_SUFFIX = ".key"
SECRET_SUFFIX = ".key_secret"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class KeyFileError(ValueError):
    """A key file or folder that cannot be used; the text names the path and what is wrong."""


def create_keys(directory: Path, name: str) -> tuple[Path, Path]:
    """Write NAME.key (public) and NAME.key_secret (secret, mode 600) into `directory`; never overwrite."""
    if not _NAME.match(name):
        raise KeyFileError(f"key name {name!r}: use letters, digits, '.', '_' and '-' (e.g. client-0)")
    directory = Path(directory)
    public, secret = directory / f"{name}{PUBLIC_SUFFIX}", directory / f"{name}{SECRET_SUFFIX}"
    for path in (public, secret):
        if path.exists():
            raise KeyFileError(f"{path} exists: remove it first or choose another name "
                               "(a new key pair must be copied everywhere the old one went)")
    directory.mkdir(parents=True, exist_ok=True)
    made_public, made_secret = zmq.auth.create_certificates(str(directory), name)
    os.chmod(made_secret, 0o600)  # the secret stays readable by its owner only
    return Path(made_public), Path(made_secret)


ALLOW_FOLDER = "allow"  # `edgesync keys DIR` keeps the clients' public keys in DIR/allow (for --allow)
COORDINATOR_NAME = "coordinator"  # the default name of the coordinator's key pair


@dataclass(frozen=True)
class KeyPair:
    """One name's key files after `set_up_keys`: made now or found in the folder."""

    name: str
    public: Path
    secret: Path | None  # None when only the public key is in the folder (the secret went to its machine)
    made: bool  # made by this call (False: found and kept as it was)
    allowed: Path | None  # a client's copy in the allow-list folder; None for the coordinator


def set_up_keys(directory: Path, names: list[str], coordinator: str = COORDINATOR_NAME) -> list[KeyPair]:
    """Key pairs for `names` in `directory`, and the coordinator's allow-list folder `directory/allow`.

    The pair named `coordinator` is the coordinator's; every other name is a client, whose public
    NAME.key is copied into `directory/allow` (the folder `edgesync coordinator --allow` reads). A
    name whose NAME.key exists keeps its pair as it is (only its missing allow-list copy is added),
    so a later call with new names adds clients to the same folder. Nothing is ever overwritten:
    every conflict is found before anything is written, and raised as a KeyFileError.
    """
    directory = Path(directory)
    allow = directory / ALLOW_FOLDER
    if len(set(names)) != len(names):
        raise KeyFileError(f"--name given twice: {', '.join(names)}")
    plan = []
    for name in names:
        if not _NAME.match(name):
            raise KeyFileError(f"key name {name!r}: use letters, digits, '.', '_' and '-' (e.g. client-0)")
        public, secret = directory / f"{name}{PUBLIC_SUFFIX}", directory / f"{name}{SECRET_SUFFIX}"
        exists = public.exists()
        if not exists and secret.exists():
            raise KeyFileError(f"{secret} exists without its public {public.name}: remove it first or choose "
                               "another name (a new key pair must be copied everywhere the old one went)")
        copy = None if name == coordinator else allow / public.name
        if copy is not None and copy.exists():
            if not exists:
                raise KeyFileError(f"{copy} exists but {public} does not: a client of that name is already "
                                   "admitted; choose another name, or remove the old key from the allow-list")
            if load_public(copy) != load_public(public):
                raise KeyFileError(f"{copy} holds another key than {public}: left as it is; remove the "
                                   "one that is wrong, then run this again")
        plan.append((name, public, secret, exists, copy))
    pairs = []
    for name, public, secret, exists, copy in plan:
        if not exists:
            public, secret = create_keys(directory, name)
        if copy is not None and not copy.exists():
            allow.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(public.read_bytes())
        pairs.append(KeyPair(name, public, secret if secret.exists() else None, not exists, copy))
    return pairs


def _load(path: Path) -> tuple[bytes, bytes | None]:
    if not path.is_file():
        raise KeyFileError(f"{path}: no such key file")
    try:
        public, secret = zmq.auth.load_certificate(str(path))
    except (ValueError, OSError) as exc:  # pyzmq names a missing or malformed key this way
        raise KeyFileError(f"{path}: not a ZeroMQ key file made by `edgesync keys` ({exc})") from None
    if public is None or len(public) != 40:
        raise KeyFileError(f"{path}: holds no public key (expected a file made by `edgesync keys`)")
    return public, secret


def load_secret(path: Path) -> tuple[bytes, bytes]:
    """(public, secret) from NAME.key_secret."""
    public, secret = _load(Path(path))
    if secret is None or len(secret) != 40:
        raise KeyFileError(f"{path}: holds no secret key; pass NAME{SECRET_SUFFIX}, not the public NAME{PUBLIC_SUFFIX}")
    return public, secret


def load_public(path: Path) -> bytes:
    """The public key from NAME.key (or from NAME.key_secret, which holds it too)."""
    return _load(Path(path))[0]


def allowed_keys(folder: Path) -> dict[bytes, Path]:
    """The public keys of the allow-list folder (its *.key files), each with its file."""
    folder = Path(folder)
    if not folder.is_dir():
        raise KeyFileError(f"allow-list {folder}: no such folder (put each client's NAME{PUBLIC_SUFFIX} there)")
    keys = {load_public(path): path for path in sorted(folder.glob(f"*{PUBLIC_SUFFIX}"))}
    if not keys:
        raise KeyFileError(f"allow-list {folder}: holds no *{PUBLIC_SUFFIX} files, so no client could join; "
                           f"copy each client's public NAME{PUBLIC_SUFFIX} there")
    secrets = sorted(p.name for p in folder.glob(f"*{SECRET_SUFFIX}"))
    if secrets:
        log.warning("allow-list %s holds secret keys (%s): only public %s files belong there; keep each "
                    "secret on its own machine", folder, ", ".join(secrets), PUBLIC_SUFFIX)
    return keys


@dataclass(frozen=True)
class ServerKeys:
    """The coordinator's key pair and the folder of client public keys it admits."""

    public: bytes
    secret: bytes
    allow_dir: Path
    secret_file: Path | None = None  # where the pair was read from (follower shards are given the same)

    @classmethod
    def from_files(cls, secret_file: Path, allow_dir: Path) -> "ServerKeys":
        public, secret = load_secret(secret_file)
        allowed_keys(allow_dir)  # fail now on an empty or missing folder, not at the first client
        return cls(public, secret, Path(allow_dir), Path(secret_file))

    def as_client(self) -> "ClientKeys":
        """A sharded coordinator's lead talks to its follower shards with the coordinator's own key pair:
        they hold the same pair, and admit its public key besides the allow-list (`admit`)."""
        return ClientKeys(self.public, self.secret, self.public)


@dataclass(frozen=True)
class ClientKeys:
    """A client's key pair and the coordinator's public key."""

    public: bytes
    secret: bytes
    server_public: bytes

    @classmethod
    def from_files(cls, secret_file: Path, server_key_file: Path) -> "ClientKeys":
        public, secret = load_secret(secret_file)
        return cls(public, secret, load_public(server_key_file))


def make_curve_server(sock: zmq.Socket, keys: ServerKeys) -> None:
    """Before bind: the socket accepts CURVE clients only, and asks the ZAP handler about each."""
    sock.curve_secretkey = keys.secret
    sock.curve_publickey = keys.public
    sock.curve_server = True


def make_curve_client(sock: zmq.Socket, keys: ClientKeys) -> None:
    """Before connect: the socket talks CURVE to the server holding `keys.server_public`'s secret."""
    sock.curve_serverkey = keys.server_public
    sock.curve_publickey = keys.public
    sock.curve_secretkey = keys.secret


class AllowListAuthenticator(ThreadAuthenticator):
    """ZAP handler thread: admits client keys found in the allow-list folder and logs every refusal.

    It reads the folder at every handshake (a few small files, once per connection), so a lab can add
    or remove a client's public key while the coordinator runs. `refused` lists (address, z85 key).
    """

    def __init__(self, context: zmq.Context, allow_dir: Path, admit: tuple[bytes, ...] = ()):
        super().__init__(context, log=logging.getLogger("edgesync.security.zap"))
        self.allow_dir = Path(allow_dir)
        self.admit = {z85.decode(k) if len(k) == 40 else k for k in admit}  # keys admitted besides the folder's
        self.refused: list[tuple[str, str]] = []
        self._address = "?"

    def reload(self) -> None:
        self.configure_curve(domain="*", location=str(self.allow_dir))

    async def handle_zap_message(self, msg: list[bytes]) -> None:
        if len(msg) > 3:  # version, request id, domain, address, …: keep the address for the log
            self._address = msg[3].decode("utf-8", "replace")
        await super().handle_zap_message(msg)

    async def _authenticate_curve(self, domain: str, client_key: bytes) -> tuple[bool, bytes]:
        if client_key in self.admit:
            return True, b"OK"
        self.reload()
        allowed, reason = await super()._authenticate_curve(domain, client_key)
        key = z85.encode(client_key).decode("ascii")
        if allowed:
            log.info("CURVE client at %s admitted (public key %s)", self._address, key)
        else:
            self.refused.append((self._address, key))
            log.warning("refused a client at %s: its public key %s is not in the allow-list %s (%s)",
                        self._address, key, self.allow_dir, reason.decode("ascii", "replace"))
        return allowed, reason


def start_authenticator(context: zmq.Context, allow_dir: Path, admit: tuple[bytes, ...] = ()) -> AllowListAuthenticator:
    """The ZAP handler for every CURVE server socket of `context`; stop() it before terminating the context.
    `admit`: public keys admitted besides the allow-list's (z85 or raw)."""
    auth = AllowListAuthenticator(context, allow_dir, admit)
    auth.start()
    auth.reload()
    return auth


def local_keys(directory: Path, clients: int) -> tuple[ServerKeys, list[list[str]]]:
    """Keys for a run on one machine (`edgesync run --curve`), written into `directory` (a private
    temporary folder): the coordinator's ServerKeys, and each client's `edgesync client` options."""
    directory = Path(directory)
    allow = directory / "allow"
    allow.mkdir(parents=True)
    server_public, server_secret = create_keys(directory, "coordinator")
    options = []
    for rank in range(clients):
        public, secret = create_keys(directory, f"client-{rank}")
        (allow / public.name).write_bytes(public.read_bytes())
        options.append(["--curve-secret", str(secret), "--server-key", str(server_public)])
    return ServerKeys.from_files(server_secret, allow), options
