"""Type stub of the broker's C record walk (``_validate.c``); see kclient.record.check."""

def check_records(
    data: bytes | bytearray | memoryview,
    count: int,
    base_timestamp: int,
    target_timestamp: int | None,
) -> tuple[tuple[int, str] | None, int, int, int]: ...
