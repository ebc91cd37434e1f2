// Calendar periods (days, ISO weeks, months) in an IANA time zone, as [start, end) instants in
// ms. Pure: the zone rules come from Intl (the ICU data Node ships), no dependency.
//
// A period starts at local 00:00 of its first day, so a day is 23 or 25 hours long across a
// daylight-saving change, and a month lasts from 00:00 of the 1st to 00:00 of the next 1st. A
// zone that skips midnight (America/Santiago springs from 24:00 to 01:00) starts that day at its
// first instant, the end of the gap. A zone whose clock falls back over midnight has 00:00 twice:
// the day starts at the first, and the tiling is kept by choosing, for an instant, the period
// whose [start, end) holds it (so starts always increase and periods never overlap).

export type CalendarUnit = "day" | "week" | "month"; // weeks start Monday
export interface Calendar {
  unit: CalendarUnit;
  /** IANA name, validated with isTimeZone when the config is compiled. */
  tz: string;
}

const DAY_MS = 86_400_000;

/**
 * A period's nominal length, in ms: what RateLimit-Policy's w= says of a calendar window (a
 * month as 30 days). Resets are always the period's real end.
 */
export const NOMINAL_MS: Readonly<Record<CalendarUnit, number>> = {
  day: DAY_MS,
  week: 7 * DAY_MS,
  month: 30 * DAY_MS,
};

/** A local calendar date; `month` 0-11, as Date. Normalised (day 32 of a month is the 1st of the next). */
interface LocalDate {
  year: number;
  month: number;
  day: number;
}

// One formatter per zone: constructing one costs far more than formatting with it. Only zones
// that construct are cached, and there are a few hundred of them, so the map stays bounded.
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (f === undefined) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone: tz,
      hourCycle: "h23",
      era: "short",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    formatters.set(tz, f);
  }
  return f;
}

/** A UTC "wall clock" instant for a date (valid for years 0-99 too, which Date.UTC maps to 19xx). */
function wallMs(year: number, month: number, day: number): number {
  const d = new Date(0);
  d.setUTCFullYear(year, month, day);
  return d.getTime();
}

/** The zone's offset from UTC at instant t, in ms (local wall time = t + offset). */
function offsetAt(t: number, tz: string): number {
  const seconds = Math.floor(t / 1000) * 1000;
  let year = 0;
  let month = 0;
  let day = 0;
  let hour = 0;
  let minute = 0;
  let second = 0;
  let bc = false;
  for (const part of formatter(tz).formatToParts(seconds)) {
    switch (part.type) {
      case "year":
        year = Number(part.value);
        break;
      case "month":
        month = Number(part.value) - 1;
        break;
      case "day":
        day = Number(part.value);
        break;
      case "hour":
        // Some ICU versions spell midnight 24 even in h23.
        hour = Number(part.value) % 24;
        break;
      case "minute":
        minute = Number(part.value);
        break;
      case "second":
        second = Number(part.value);
        break;
      case "era":
        bc = part.value === "BC" || part.value === "B";
        break;
    }
  }
  const wall = wallMs(bc ? 1 - year : year, month, day) + ((hour * 60 + minute) * 60 + second) * 1000;
  return wall - seconds;
}

function localDateAt(t: number, tz: string): LocalDate {
  const wall = new Date(t + offsetAt(t, tz));
  return { year: wall.getUTCFullYear(), month: wall.getUTCMonth(), day: wall.getUTCDate() };
}

/**
 * The first instant whose local time is at or after 00:00 of `date`: the instant of local
 * midnight (the earlier one if the clock shows it twice), or the end of the gap if the zone
 * skips it. Zone offsets change at most once in the two days around a midnight, so the
 * offsets a day either side are the only ones it can have.
 */
function startOfLocalDay(date: LocalDate, tz: string): number {
  const wall = wallMs(date.year, date.month, date.day);
  const before = offsetAt(wall - DAY_MS, tz);
  const after = offsetAt(wall + DAY_MS, tz);
  let found = Number.POSITIVE_INFINITY;
  for (const offset of [before, after]) {
    const t = wall - offset;
    if (offsetAt(t, tz) === offset) found = Math.min(found, t);
  }
  if (found !== Number.POSITIVE_INFINITY) return found;
  // Midnight falls in a gap (the clock springs forward over it): find the transition, the first
  // instant whose wall time is past midnight, between the two candidates. One transition lies
  // between them, so the wall time rises with t there and bisection holds.
  let lo = wall - Math.max(before, after); // wall time before midnight
  let hi = wall - Math.min(before, after); // wall time at or after midnight
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (mid + offsetAt(mid, tz) >= wall) hi = mid;
    else lo = mid;
  }
  return hi;
}

/** The local date of the first day of the period that holds `date`. */
function firstDay(date: LocalDate, unit: CalendarUnit): LocalDate {
  switch (unit) {
    case "day":
      return date;
    case "week": {
      const weekday = (new Date(wallMs(date.year, date.month, date.day)).getUTCDay() + 6) % 7; // Monday 0
      return normalise({ ...date, day: date.day - weekday });
    }
    case "month":
      return { ...date, day: 1 };
  }
}

/** The first day of the period `n` periods after the one starting on `first`. */
function shift(first: LocalDate, unit: CalendarUnit, n: number): LocalDate {
  switch (unit) {
    case "day":
      return normalise({ ...first, day: first.day + n });
    case "week":
      return normalise({ ...first, day: first.day + 7 * n });
    case "month":
      return normalise({ ...first, month: first.month + n });
  }
}

function normalise(date: LocalDate): LocalDate {
  const d = new Date(wallMs(date.year, date.month, date.day));
  return { year: d.getUTCFullYear(), month: d.getUTCMonth(), day: d.getUTCDate() };
}

interface Period {
  first: LocalDate;
  start: number;
  end: number;
}

// The last period computed per unit and zone: nearly every call falls in the same period as the
// one before, and then costs no formatting at all. Keyed by the config's few (unit, zone) pairs;
// the cap only guards against a caller looping over zones.
const recent = new Map<string, Period>();
const RECENT_CAP = 64;

function periodOf(nowMs: number, unit: CalendarUnit, tz: string): Period {
  const cacheKey = `${unit}\t${tz}`;
  const cached = recent.get(cacheKey);
  if (cached !== undefined && cached.start <= nowMs && nowMs < cached.end) return cached;
  let first = firstDay(localDateAt(nowMs, tz), unit);
  let start = startOfLocalDay(first, tz);
  let end = startOfLocalDay(shift(first, unit, 1), tz);
  // Only where the clock falls back over midnight can the local date name a neighbour of the
  // period that holds the instant; step to the one that does.
  while (nowMs >= end) {
    first = shift(first, unit, 1);
    start = end;
    end = startOfLocalDay(shift(first, unit, 1), tz);
  }
  while (nowMs < start) {
    first = shift(first, unit, -1);
    end = start;
    start = startOfLocalDay(first, tz);
  }
  const period = { first, start, end };
  if (recent.size >= RECENT_CAP) recent.clear();
  recent.set(cacheKey, period);
  return period;
}

/** The period [start, end) in ms that contains nowMs, aligned to 00:00 local time in tz (DST-correct). */
export function periodAt(nowMs: number, unit: CalendarUnit, tz: string): { start: number; end: number } {
  const { start, end } = periodOf(nowMs, unit, tz);
  return { start, end };
}

/**
 * The starts of `count` consecutive periods, the first `before` periods before the one holding
 * nowMs: what a store whose clock may differ from this process's chooses from (windows.lua).
 */
export function periodStarts(
  nowMs: number,
  unit: CalendarUnit,
  tz: string,
  before: number,
  count: number,
): number[] {
  const { first } = periodOf(nowMs, unit, tz);
  const starts: number[] = [];
  for (let i = 0; i < count; i++) starts.push(startOfLocalDay(shift(first, unit, i - before), tz));
  return starts;
}

const pad = (n: number, width = 2) => String(n).padStart(width, "0");

/** "2026-12" (month), "2026-12-01" (day), "2026-W49" (ISO week) of the period containing nowMs in tz. */
export function periodId(nowMs: number, unit: CalendarUnit, tz: string): string {
  const { first } = periodOf(nowMs, unit, tz);
  switch (unit) {
    case "month":
      return `${pad(first.year, 4)}-${pad(first.month + 1)}`;
    case "day":
      return `${pad(first.year, 4)}-${pad(first.month + 1)}-${pad(first.day)}`;
    case "week": {
      // ISO 8601: a week belongs to the year of its Thursday; week 1 holds the year's first Thursday.
      const thursday = normalise({ ...first, day: first.day + 3 });
      const dayOfYear =
        (wallMs(thursday.year, thursday.month, thursday.day) - wallMs(thursday.year, 0, 1)) / DAY_MS;
      return `${pad(thursday.year, 4)}-W${pad(Math.floor(dayOfYear / 7) + 1)}`;
    }
  }
}

const MONTH_ID = /^(\d{4})-(\d{2})$/;
const DAY_ID = /^(\d{4})-(\d{2})-(\d{2})$/;

/** Parses "YYYY-MM" (month) or "YYYY-MM-DD" (day); null when malformed or not a real date. */
export function parsePeriod(
  text: string,
  tz: string,
): { unit: "month" | "day"; id: string; start: number; end: number } | null {
  if (!isTimeZone(tz)) return null;
  const day = DAY_ID.exec(text);
  const month = day === null ? MONTH_ID.exec(text) : null;
  const match = day ?? month;
  if (match === null) return null;
  const year = Number(match[1]);
  const monthIndex = Number(match[2]) - 1;
  const dayOfMonth = day === null ? 1 : Number(match[3]);
  if (year < 1 || monthIndex < 0 || monthIndex > 11 || dayOfMonth < 1) return null;
  const first = { year, month: monthIndex, day: dayOfMonth };
  // 2026-02-30 normalises to March: not a real date.
  const real = normalise(first);
  if (real.month !== monthIndex || real.day !== dayOfMonth) return null;
  const unit = day === null ? "month" : "day";
  return {
    unit,
    id: text,
    start: startOfLocalDay(first, tz),
    end: startOfLocalDay(shift(first, unit, 1), tz),
  };
}

/** Whether Intl knows tz as a time zone name (IANA: "UTC", "Europe/Berlin"); offsets such as "+01:00" are not names. */
export function isTimeZone(tz: string): boolean {
  if (!/^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)*$/.test(tz)) return false;
  try {
    formatter(tz);
    return true;
  } catch {
    return false;
  }
}
