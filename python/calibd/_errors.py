"""The base of the exceptions the calibd package defines."""


class CalibdError(Exception):
    """The base of calibd's own exceptions: Rejected (a ValueError too),
    Reject, NotParams and NotApplicable. `except calibd.CalibdError` takes
    all four; arguments the package refuses before anything is sent raise
    the built-in ValueError, and socket trouble the built-in
    ConnectionError, TimeoutError or RuntimeError, as before."""
