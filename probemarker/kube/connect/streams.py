"""An answer read as it arrives: a watch line by line, a LIST item by item.

Stage: inside `probemarker.kube.connect`, under `KubeClient.stream_lines` and
`KubeClient.list_page` (client.py). Input: an open aiohttp answer and its
`RequestInfo`. Output: the lines of a watch (`lines`, without aiohttp's 128 KiB line
limit), the parsed items of a LIST handed over one at a time and the answer without
them (`read_list`, through listbody.py), so a big answer is never held whole. A line
or an item over its limit, or a malformed list, is `ApiMalformed`; a dropped
connection is mapped by sessions.py's `mapped`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp

from probemarker.kube.connect.errors import ApiMalformed, RequestInfo, loads_object
from probemarker.kube.connect.listbody import ListBody, ListBodyError
from probemarker.kube.connect.sessions import mapped

__all__ = ["lines", "read_list"]


async def _chunk(response: aiohttp.ClientResponse, info: RequestInfo) -> bytes:
    """The body's next bytes as they arrive; empty at its end."""
    with mapped(info):
        return await response.content.readany()


async def lines(
    response: aiohttp.ClientResponse, info: RequestInfo, *, limit: int
) -> AsyncIterator[bytes]:
    """The non-blank lines of a streaming answer; one longer than `limit` bytes raises."""
    buffer = bytearray()
    while chunk := await _chunk(response, info):
        buffer += chunk
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            line = bytes(buffer[start:end])
            start = end + 1
            if len(line) > limit:
                raise ApiMalformed(f"a stream line is longer than {limit} bytes", request=info)
            if line.strip():
                yield line
        del buffer[:start]
        if len(buffer) > limit:
            raise ApiMalformed(f"a stream line is longer than {limit} bytes", request=info)
    if bytes(buffer).strip():
        yield bytes(buffer)


async def read_list(
    response: aiohttp.ClientResponse,
    info: RequestInfo,
    *,
    item: Callable[[dict[str, Any]], None],
    max_item_bytes: int,
) -> dict[str, Any]:
    """Hand each item of a LIST answer to `item` as soon as it has arrived; return the
    answer without its items. The answer goes back to its pool only when read to its
    end (an exception of `item` propagates and closes the connection)."""
    body = ListBody(max_item_bytes=max_item_bytes)
    read = False
    try:
        while chunk := await _chunk(response, info):
            try:
                raws = body.feed(chunk)
            except ListBodyError as err:
                raise ApiMalformed(f"the list answer: {err}", request=info) from err
            for raw in raws:
                item(loads_object(raw, what="a listed item", request=info))
        try:
            rest = body.finish()
        except ListBodyError as err:
            raise ApiMalformed(f"the list answer: {err}", request=info) from err
        read = True
    finally:
        # A connection whose answer was not read to its end never goes back to the pool.
        if read:
            response.release()
        else:
            response.close()
    return loads_object(rest, what="the answer", request=info)
