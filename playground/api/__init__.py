"""The OpenAI-compatible HTTP API (/v1/models, /v1/completions, /v1/chat/completions).

A second door to the same queue as the browser's WebSocket: a request is parsed once
(protocol.parse_completion / parse_chat, through services.parse_api_request), authorised and rate-limited (`auth.py`), recorded as a Run and put on the
"inference" queue; `runs.py` follows the worker's gen.* messages and cancels the run when the
client goes away; `format.py` writes OpenAI's JSON and SSE chunks. Views in `views.py`.
"""
