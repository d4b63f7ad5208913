from typing import Any

class AnswerMethod:
    def __init__(self, general: Any, /) -> None: ...
    def __get__(self, obj: object, owner: type | None = None) -> Any: ...
    def __call__(self, *args: Any) -> Any: ...

def configure(
    response_type: type,
    batch_type: type,
    result_type: type,
    accumulator_type: type,
    incomplete_type: type,
    pool_type: type,
    succeeded: object,
    duplicate_sequence_code: int,
    /,
) -> None: ...
