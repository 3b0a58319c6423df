"""OpenAI's error object: `{"error": {"message", "type", "param", "code"}}` with an HTTP status."""
from __future__ import annotations

from django.http import JsonResponse

TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
         404: "not_found_error", 405: "invalid_request_error", 429: "rate_limit_error", 500: "server_error",
         503: "server_error"}


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 retry_after: int | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.retry_after = status, message, param, code, retry_after

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": TYPES.get(self.status, "invalid_request_error"),
                          "param": self.param, "code": self.code}}

    def response(self) -> JsonResponse:
        response = JsonResponse(self.body(), status=self.status)
        if self.retry_after is not None:
            response["Retry-After"] = str(self.retry_after)
        return response
