"""HTTP dates (RFC 9110 §5.6.7) as Unix seconds, for any year Nextcloud may write.

Nextcloud keeps a file's mtime as a 64-bit integer and accepts any above one day
(nextcloud/server ``apps/dav/lib/Connector/Sabre/MtimeSanitizer.php``); sabre/http writes it
with PHP's ``DateTime::format('D, d M Y H:i:s \\G\\M\\T')``, whose ``Y`` is the whole year, so a
file dated after 9999 is listed with a five-digit year. ``email.utils.parsedate_to_datetime``
stops at ``datetime``'s year 9999 and raised ``ValueError`` on it, which made the listing of
the file's whole folder unreadable.
"""

from __future__ import annotations

import calendar
from datetime import datetime
from email.utils import parsedate_tz

#: Seconds in 400 Gregorian years (146,097 days): the calendar repeats after them, so a date
#: past ``datetime``'s range is counted from the same date in 1600–1999.
GREGORIAN_CYCLE_SECONDS = 146_097 * 86_400


def http_date_seconds(value: str) -> int:
    """``value`` (an HTTP date, e.g. ``Tue, 06 Jan 2026 09:15:00 GMT``; the obsolete forms
    ``email.utils.parsedate_tz`` reads too) as Unix seconds, whatever its year. Raises
    ``ValueError`` when it is not a date, or names a day or time no calendar has (31 February,
    25:00)."""
    parts = parsedate_tz(value)
    if parts is None:
        raise ValueError(f"not an HTTP date: {value!r}")
    year, month, day, hour, minute, second = parts[:6]
    cycles, year = divmod(year - 1600, 400)
    # datetime checks the day and time (a leap second, :60, is let through as RFC 9110 allows)
    datetime(year + 1600, month, day, hour, minute, min(second, 59))
    seconds = calendar.timegm((year + 1600, month, day, hour, minute, second))
    return seconds + cycles * GREGORIAN_CYCLE_SECONDS - (parts[9] or 0)
