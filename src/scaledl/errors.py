"""Errors a user can fix. The CLI prints them as one line and exits non-zero."""


class UserError(Exception):
    """Bad input: the message says what is wrong and what to do about it."""


class DataError(UserError):
    """A raw or prepared dataset file is missing, corrupt or malformed."""
