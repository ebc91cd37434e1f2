// Calendar periods in IANA zones: days, ISO weeks and months that start at local 00:00, across
// daylight-saving changes (23 and 25 hour days), month and year ends, a leap day, and zones whose
// midnight does not exist on the day the clock springs forward.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type CalendarUnit,
  isTimeZone,
  parsePeriod,
  periodAt,
  periodId,
  periodStarts,
} from "../../src/limits/calendar.js";

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();
/** The period holding `t`, as ISO strings (readable failures). */
const period = (t: string, unit: CalendarUnit, tz: string) => {
  const p = periodAt(at(t), unit, tz);
  return [iso(p.start), iso(p.end)];
};
const HOUR = 3_600_000;
const hours = (t: string, unit: CalendarUnit, tz: string) => {
  const p = periodAt(at(t), unit, tz);
  return (p.end - p.start) / HOUR;
};

describe("days", () => {
  it("in UTC, from 00:00 to 00:00", () => {
    expect(period("2026-12-01T13:45:00.000Z", "day", "UTC")).toEqual([
      "2026-12-01T00:00:00.000Z",
      "2026-12-02T00:00:00.000Z",
    ]);
    expect(period("2026-12-01T00:00:00.000Z", "day", "UTC")[0]).toBe("2026-12-01T00:00:00.000Z");
    expect(period("2026-11-30T23:59:59.999Z", "day", "UTC")[0]).toBe("2026-11-30T00:00:00.000Z");
  });

  it("New York springs forward on 2026-03-08: a 23 hour day from EST to EDT midnight", () => {
    expect(period("2026-03-08T12:00:00.000Z", "day", "America/New_York")).toEqual([
      "2026-03-08T05:00:00.000Z",
      "2026-03-09T04:00:00.000Z",
    ]);
    expect(hours("2026-03-08T12:00:00.000Z", "day", "America/New_York")).toBe(23);
    // 01:59:59.999 EST and 03:00 EDT are one millisecond apart, on the same day.
    expect(period("2026-03-08T06:59:59.999Z", "day", "America/New_York")[0]).toBe("2026-03-08T05:00:00.000Z");
    expect(period("2026-03-08T07:00:00.000Z", "day", "America/New_York")[0]).toBe("2026-03-08T05:00:00.000Z");
  });

  it("New York falls back on 2026-11-01: a 25 hour day, whose budget lasts until local midnight", () => {
    expect(period("2026-11-01T04:00:00.000Z", "day", "America/New_York")).toEqual([
      "2026-11-01T04:00:00.000Z",
      "2026-11-02T05:00:00.000Z",
    ]);
    expect(hours("2026-11-02T04:30:00.000Z", "day", "America/New_York")).toBe(25);
    // 23:59:59.999 EST on the 1st, then midnight of the 2nd.
    expect(period("2026-11-02T04:59:59.999Z", "day", "America/New_York")[0]).toBe("2026-11-01T04:00:00.000Z");
    expect(period("2026-11-02T05:00:00.000Z", "day", "America/New_York")[0]).toBe("2026-11-02T05:00:00.000Z");
  });

  it("Berlin springs forward on 2026-03-29 (23 h) and falls back on 2026-10-25 (25 h)", () => {
    expect(period("2026-03-29T10:00:00.000Z", "day", "Europe/Berlin")).toEqual([
      "2026-03-28T23:00:00.000Z",
      "2026-03-29T22:00:00.000Z",
    ]);
    expect(period("2026-10-25T10:00:00.000Z", "day", "Europe/Berlin")).toEqual([
      "2026-10-24T22:00:00.000Z",
      "2026-10-25T23:00:00.000Z",
    ]);
    // The day before each change is an ordinary 24 hours.
    expect(hours("2026-03-28T10:00:00.000Z", "day", "Europe/Berlin")).toBe(24);
    expect(hours("2026-10-24T10:00:00.000Z", "day", "Europe/Berlin")).toBe(24);
  });

  it("Santiago skips midnight on 2026-09-06 (00:00 is 01:00): the day starts at its first instant", () => {
    // 2026-09-05 00:00 -04 to 2026-09-06 01:00 -03, which is the same instant as 00:00 -04 would be.
    expect(period("2026-09-06T12:00:00.000Z", "day", "America/Santiago")).toEqual([
      "2026-09-06T04:00:00.000Z",
      "2026-09-07T03:00:00.000Z",
    ]);
    expect(period("2026-09-06T03:59:59.999Z", "day", "America/Santiago")[0]).toBe("2026-09-05T04:00:00.000Z");
    expect(periodId(at("2026-09-06T04:00:00.000Z"), "day", "America/Santiago")).toBe("2026-09-06");
    // And falls back from 24:00 to 23:00 on 2026-04-04: that Saturday is 25 hours long.
    expect(period("2026-04-05T03:30:00.000Z", "day", "America/Santiago")).toEqual([
      "2026-04-04T03:00:00.000Z",
      "2026-04-05T04:00:00.000Z",
    ]);
  });

  it("Beirut springs from 00:00 to 01:00 on 2026-03-29", () => {
    expect(period("2026-03-29T12:00:00.000Z", "day", "Asia/Beirut")).toEqual([
      "2026-03-28T22:00:00.000Z",
      "2026-03-29T21:00:00.000Z",
    ]);
  });

  it("the Azores fall back from 01:00 to 00:00 on 2026-10-25: the day starts at the first 00:00", () => {
    expect(period("2026-10-25T00:30:00.000Z", "day", "Atlantic/Azores")).toEqual([
      "2026-10-25T00:00:00.000Z",
      "2026-10-26T01:00:00.000Z",
    ]);
    expect(period("2026-10-24T23:59:59.999Z", "day", "Atlantic/Azores")[1]).toBe("2026-10-25T00:00:00.000Z");
  });

  it("a zone with a half-hour offset", () => {
    expect(period("2026-12-01T20:00:00.000Z", "day", "Asia/Kolkata")).toEqual([
      "2026-12-01T18:30:00.000Z",
      "2026-12-02T18:30:00.000Z",
    ]);
  });
});

describe("weeks start Monday 00:00", () => {
  it("in UTC and in New York", () => {
    // 2026-12-03 is a Thursday.
    expect(period("2026-12-03T12:00:00.000Z", "week", "UTC")).toEqual([
      "2026-11-30T00:00:00.000Z",
      "2026-12-07T00:00:00.000Z",
    ]);
    expect(period("2026-12-07T00:00:00.000Z", "week", "UTC")[0]).toBe("2026-12-07T00:00:00.000Z");
    expect(period("2026-12-06T23:59:59.999Z", "week", "UTC")[0]).toBe("2026-11-30T00:00:00.000Z");
    // The week of 2026-11-01 (a Sunday) holds the 25 hour day: 169 hours.
    expect(period("2026-11-01T12:00:00.000Z", "week", "America/New_York")).toEqual([
      "2026-10-26T04:00:00.000Z",
      "2026-11-02T05:00:00.000Z",
    ]);
  });

  it("are named by ISO 8601 week, in the year of their Thursday", () => {
    expect(periodId(at("2026-12-01T12:00:00.000Z"), "week", "UTC")).toBe("2026-W49");
    expect(periodId(at("2026-01-01T12:00:00.000Z"), "week", "UTC")).toBe("2026-W01");
    // 2026 has 53 weeks; its last one ends on Sunday 2027-01-03.
    expect(periodId(at("2027-01-03T12:00:00.000Z"), "week", "UTC")).toBe("2026-W53");
    expect(periodId(at("2027-01-04T00:00:00.000Z"), "week", "UTC")).toBe("2027-W01");
    // 2024-12-30 (a Monday) is in week 1 of 2025.
    expect(periodId(at("2024-12-31T12:00:00.000Z"), "week", "UTC")).toBe("2025-W01");
  });
});

describe("months start at 00:00 of the 1st", () => {
  it("in UTC, across the year end", () => {
    expect(period("2026-12-31T23:59:59.999Z", "month", "UTC")).toEqual([
      "2026-12-01T00:00:00.000Z",
      "2027-01-01T00:00:00.000Z",
    ]);
    expect(periodId(at("2026-12-31T23:59:59.999Z"), "month", "UTC")).toBe("2026-12");
    expect(periodId(at("2027-01-01T00:00:00.000Z"), "month", "UTC")).toBe("2027-01");
  });

  it("in New York: November holds the 25 hour day, local midnight of 1 Dec is 05:00 UTC", () => {
    expect(period("2026-11-30T12:00:00.000Z", "month", "America/New_York")).toEqual([
      "2026-11-01T04:00:00.000Z",
      "2026-12-01T05:00:00.000Z",
    ]);
    expect(periodId(at("2026-12-01T04:59:59.999Z"), "month", "America/New_York")).toBe("2026-11");
    expect(periodId(at("2026-12-01T05:00:00.000Z"), "month", "America/New_York")).toBe("2026-12");
  });

  it("the leap day 2028-02-29 is in February, and February 2028 has 29 days", () => {
    expect(period("2028-02-29T12:00:00.000Z", "month", "UTC")).toEqual([
      "2028-02-01T00:00:00.000Z",
      "2028-03-01T00:00:00.000Z",
    ]);
    expect(period("2028-02-29T12:00:00.000Z", "day", "UTC")).toEqual([
      "2028-02-29T00:00:00.000Z",
      "2028-03-01T00:00:00.000Z",
    ]);
    expect(periodId(at("2028-02-29T23:00:00.000Z"), "day", "Europe/Berlin")).toBe("2028-03-01");
  });
});

describe("periodStarts", () => {
  it("lists consecutive period starts around an instant", () => {
    expect(periodStarts(at("2026-11-15T00:00:00.000Z"), "month", "UTC", 1, 4).map(iso)).toEqual([
      "2026-10-01T00:00:00.000Z",
      "2026-11-01T00:00:00.000Z",
      "2026-12-01T00:00:00.000Z",
      "2027-01-01T00:00:00.000Z",
    ]);
  });
});

describe("parsePeriod", () => {
  it("reads a month or a day, in the zone", () => {
    expect(parsePeriod("2026-12", "UTC")).toEqual({
      unit: "month",
      id: "2026-12",
      start: at("2026-12-01T00:00:00.000Z"),
      end: at("2027-01-01T00:00:00.000Z"),
    });
    expect(parsePeriod("2026-11-01", "America/New_York")).toEqual({
      unit: "day",
      id: "2026-11-01",
      start: at("2026-11-01T04:00:00.000Z"),
      end: at("2026-11-02T05:00:00.000Z"),
    });
    expect(parsePeriod("2028-02-29", "UTC")?.unit).toBe("day");
  });

  it("refuses what is malformed or not a real date", () => {
    for (const text of [
      "2026-02-29",
      "2026-13",
      "2026-00",
      "2026-04-31",
      "2026-12-00",
      "2026-1",
      "26-12",
      "2026-12-01T00:00",
      " 2026-12",
      "2026-W49",
      "",
      "0000-01",
    ]) {
      expect(parsePeriod(text, "UTC"), text).toBeNull();
    }
    expect(parsePeriod("2026-12", "Mars/Olympus")).toBeNull();
  });
});

describe("isTimeZone", () => {
  it("knows IANA names, not offsets or made-up names", () => {
    for (const tz of [
      "UTC",
      "Europe/Berlin",
      "America/New_York",
      "America/Argentina/Buenos_Aires",
      "Etc/GMT+5",
    ])
      expect(isTimeZone(tz), tz).toBe(true);
    for (const tz of ["", "Mars/Olympus", "+01:00", "Europe/Berlin ", "../etc/passwd", "GMT+25"])
      expect(isTimeZone(tz), tz).toBe(false);
  });
});

const ZONES = [
  "UTC",
  "America/New_York",
  "Europe/Berlin",
  "America/Santiago",
  "Asia/Beirut",
  "Australia/Lord_Howe", // a 30 minute DST shift
  "Asia/Kathmandu",
  "Pacific/Apia", // skipped a whole day, 2011-12-30
  "America/Havana", // springs forward at midnight
  "Atlantic/Azores", // falls back from 01:00 to 00:00: midnight twice
];
const UNITS: CalendarUnit[] = ["day", "week", "month"];

/** The local date of an instant in a zone, as "YYYY-MM-DD" (compared as text, it orders dates). */
function localDate(t: number, tz: string): string {
  return new Intl.DateTimeFormat("en-CA", {
    timeZone: tz,
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
  }).format(t);
}

describe("for any instant, zone and unit", () => {
  const instant = fc.integer({ min: Date.UTC(1990, 0, 1), max: Date.UTC(2060, 0, 1) });
  const zone = fc.constantFrom(...ZONES);
  const unit = fc.constantFrom(...UNITS);

  it("the period holds it, and the next period starts where it ends", () => {
    fc.assert(
      fc.property(instant, zone, unit, (t, tz, u) => {
        const p = periodAt(t, u, tz);
        expect(p.start).toBeLessThanOrEqual(t);
        expect(t).toBeLessThan(p.end);
        expect(periodAt(p.end, u, tz).start).toBe(p.end);
        expect(periodAt(p.start, u, tz)).toEqual(p);
        expect(periodAt(p.end - 1, u, tz)).toEqual(p);
        expect(periodId(p.start, u, tz)).toBe(periodId(t, u, tz));
        expect(periodId(p.end, u, tz)).not.toBe(periodId(t, u, tz));
      }),
      { numRuns: 2000 },
    );
  });

  it("a period starts on a new local date: at 00:00, or at the first instant of a day without one", () => {
    fc.assert(
      fc.property(instant, zone, unit, (t, tz, u) => {
        const { start } = periodAt(t, u, tz);
        expect(localDate(start - 1, tz) < localDate(start, tz)).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });

  it("a day lasts 22 to 26 hours, a week 7 days, a month 28 to 31 days (give or take an hour)", () => {
    fc.assert(
      fc.property(
        instant,
        fc.constantFrom(...ZONES.filter((z) => z !== "Pacific/Apia")),
        unit,
        (t, tz, u) => {
          const { start, end } = periodAt(t, u, tz);
          const length = (end - start) / HOUR;
          const [min, max] = u === "day" ? [22, 26] : u === "week" ? [166, 170] : [28 * 24 - 2, 31 * 24 + 2];
          expect(length).toBeGreaterThanOrEqual(min);
          expect(length).toBeLessThanOrEqual(max);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it("parsePeriod of a period's id gives back the period", () => {
    fc.assert(
      fc.property(instant, zone, fc.constantFrom<"day" | "month">("day", "month"), (t, tz, u) => {
        const p = periodAt(t, u, tz);
        const parsed = parsePeriod(periodId(t, u, tz), tz);
        expect(parsed).toEqual({ unit: u, id: periodId(t, u, tz), start: p.start, end: p.end });
      }),
      { numRuns: 500 },
    );
  });
});
