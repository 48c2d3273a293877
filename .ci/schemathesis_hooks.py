"""Keeps schemathesis from sending an id other than the one it means, and (SCHEMATHESIS_LARGE_BODIES=1) makes
written rows of every size up to the body limit.

Schemathesis unquotes a path parameter before quoting it ("idempotent for already-escaped inputs"), so an id
that holds a percent escape such as `a%22b` -- a valid id (PROTOCOL.md §1) -- reaches the server as `a"b`, an
invalid one, and a correct 400 is reported as a schema-valid request refused. Ids like that are left out: as a
path parameter, and as a body id (the stateful phase would learn them from the Location header).
"""

import os
import zlib
from urllib.parse import unquote

import schemathesis


def _sent_as_written(value):
    return not isinstance(value, str) or unquote(value) == value


@schemathesis.hook
def filter_path_parameters(context, path_parameters):
    return _sent_as_written((path_parameters or {}).get("id"))


@schemathesis.hook
def filter_body(context, body):
    return not isinstance(body, dict) or _sent_as_written(body.get("id"))


# Sizes of the extra text field a large-bodies run adds: from none to just under the 1 MiB body limit, so that
# answers (the echo, a page of such rows, up to the 8 MiB page bound) come in every size too.
_BLOB_SIZES = [0, 100, 1024, 64 * 1024, 300 * 1000, 900 * 1000]


@schemathesis.hook
def map_body(context, body):
    if os.environ.get("SCHEMATHESIS_LARGE_BODIES") != "1" or not isinstance(body, dict) or "requests" in body:
        return body
    size = _BLOB_SIZES[zlib.crc32(repr(sorted(body.items(), key=str)).encode()) % len(_BLOB_SIZES)]
    return {**body, "blob": "b" * size} if size else body
