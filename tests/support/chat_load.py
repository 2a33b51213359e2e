"""Many named sessions through a gateway's `POST /v1/chat/completions`, a few at a time."""

from __future__ import annotations

import anyio
import httpx2


async def one_turn_per_session(
    url: str, token: str, indexes: range, *, user_prefix: str, concurrency: int
) -> list[str]:
    """One turn on each session `{user_prefix}-{index}` (`user` field), `concurrency` at once.

    The model behind the gateway echoes; a failed request or a reply other than the sent text
    is returned as an error line naming the index.
    """
    errors: list[str] = []
    pending = iter(indexes)
    limits = httpx2.Limits(max_connections=concurrency)
    headers = {"authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(
        base_url=url, headers=headers, limits=limits, timeout=60
    ) as client:

        async def worker() -> None:
            for index in pending:
                text = f"session {index}"
                body = {
                    "model": "nodmix",
                    "user": f"{user_prefix}-{index}",
                    "messages": [{"role": "user", "content": text}],
                }
                response = await client.post("/v1/chat/completions", json=body)
                if response.status_code != 200:
                    errors.append(f"{index}: HTTP {response.status_code} {response.text[:200]}")
                elif response.json()["choices"][0]["message"]["content"] != text:
                    errors.append(f"{index}: wrong reply {response.text[:200]}")

        async with anyio.create_task_group() as group:
            for _ in range(concurrency):
                group.start_soon(worker)
    return errors
