"""The official MCP Python SDK's client against a real mirai (spec/mcp_python.rs).

Usage: mcp_oauth_client.py MCP_URL TOOL ARGUMENTS_JSON

The SDK's OAuthClientProvider does the whole sign-in by itself: mirai's 401
and its protected resource metadata, the authorization server's metadata,
dynamic client registration (RFC 7591), the authorization code with PKCE,
the token. The one thing a person would do, approving at the provider, is
the redirect handler here: it GETs the authorization URL without following
the redirect and hands the code and state it carries to the callback
handler. Then the tool is called over Streamable HTTP, and its result is
printed as one JSON line: {"is_error", "text", "protocol_version"}.

Exit 2 on wrong arguments, 3 when the SDK is not installed (the message
says how to install it), 1 when the flow or the call fails.
"""

import asyncio
import json
import sys
from urllib.parse import parse_qs, urlparse

try:
    import httpx2
    from mcp import Client
    from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
except ImportError as missing:
    print(
        f"the MCP Python SDK is not installed for {sys.executable} ({missing}): "
        "pip install -r spec/python/requirements.txt into the interpreter MIRAI_MCP_PYTHON names",
        file=sys.stderr,
    )
    sys.exit(3)

REDIRECT_URI = "http://127.0.0.1:9/callback"


class MemoryStorage:
    """Tokens and the registered client, kept for this run only."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def run(mcp_url: str, tool: str, arguments: dict) -> dict:
    returned: dict[str, str | None] = {}

    async def redirect_handler(authorization_url: str) -> None:
        # The provider approves at once and answers with a redirect to our URI.
        async with httpx2.AsyncClient(follow_redirects=False) as http:
            answer = await http.get(authorization_url)
        location = answer.headers.get("location")
        if answer.status_code not in (302, 303) or not location:
            raise RuntimeError(f"the provider did not redirect: {answer.status_code} {answer.text}")
        query = parse_qs(urlparse(location).query)
        returned["code"] = query.get("code", [None])[0]
        returned["state"] = query.get("state", [None])[0]

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=returned["code"] or "", state=returned["state"])

    provider = OAuthClientProvider(
        server_url=mcp_url,
        client_metadata=OAuthClientMetadata(
            client_name="mirai spec (MCP Python SDK)",
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code"],
            response_types=["code"],
            token_endpoint_auth_method="none",
            scope="notes:read notes:write",
        ),
        storage=MemoryStorage(),
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with Client(streamable_http_client(mcp_url, http_client=http)) as client:
            result = await client.call_tool(tool, arguments)
            version = getattr(client, "protocol_version", None)
    text = "".join(getattr(part, "text", "") for part in result.content)
    return {"is_error": bool(result.is_error if hasattr(result, "is_error") else result.isError),
            "text": text, "protocol_version": str(version) if version else None}


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    mcp_url, tool, arguments = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    print(json.dumps(asyncio.run(run(mcp_url, tool, arguments))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
