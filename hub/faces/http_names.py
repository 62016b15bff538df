"""Which Host and Origin a local HTTP face answers: the MCP server's HTTP transport and `hub board` share
them, so a page on another site (DNS rebinding, a cross-site form) is refused the same way by both."""

from __future__ import annotations

import ipaddress

# A token guarding a non-loopback address: long enough that guessing it is no option (128 bits of
# token_urlsafe are 22 characters).
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind_address(host)).is_loopback
    except ValueError:
        return False


def bind_address(host: str) -> str:
    """`[::1]` as the CLI may give it is `::1` to bind; anything else unchanged."""
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def url_host(host: str) -> str:
    bare = bind_address(host)
    return f"[{bare}]" if ":" in bare else bare


def allowed_hosts(host: str, port: int) -> list[str]:
    """The Host headers a server bound to `host:port` answers: the address bound, or localhost (with or
    without the port)."""
    names = {url_host(host), "localhost"}
    return sorted({f"{n}:{port}" for n in names} | names)


def allowed_origins(host: str, port: int) -> list[str]:
    """The Origin headers of the server's own pages."""
    names = {url_host(host), "localhost"}
    return sorted(f"{scheme}://{n}:{port}" for n in names for scheme in ("http", "https"))
