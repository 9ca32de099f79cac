"""What the Producer's and the Follower's sockets share: CURVE keys and
endpoints written as calibd writes them."""
from __future__ import annotations  # zmq.Socket is generic for mypy, not in old pyzmq

from typing import Any, Optional, Sequence, Union

import zmq
import zmq.auth


def curve(sock: zmq.Socket[Any], key: Optional[str], server_key: Optional[str]) -> None:
    """CURVE on sock: this side's key pair file (NAME.key_secret) and
    calibd's public key file (NAME.key), as `calibctl keygen` writes them;
    both or neither."""
    if (key is None) != (server_key is None):
        raise ValueError("CURVE needs both key and server_key")
    if key is None or server_key is None:
        return
    public, secret = zmq.auth.load_certificate(key)
    server_public, _ = zmq.auth.load_certificate(server_key)
    if not secret:
        raise ValueError("%s: no secret-key: give the key pair (NAME.key_secret)" % key)
    sock.curve_publickey = public
    sock.curve_secretkey = secret
    sock.curve_serverkey = server_public


def attach(sock: zmq.Socket[Any], endpoints: Union[str, Sequence[str]]) -> None:
    """Connects sock to each endpoint: a leading ">" connects, "@" binds,
    bare ones connect."""
    for ep in [endpoints] if isinstance(endpoints, str) else endpoints:
        if ep.startswith("@"):
            sock.bind(ep[1:])
        else:
            sock.connect(ep[1:] if ep.startswith(">") else ep)
