import { describe, expect, it } from "vitest";
import {
  formatDuration,
  parseDuration,
  parsePercent,
  parseRate,
  parseSize,
  parseWindow,
} from "../../src/config/units.js";

describe("units", () => {
  it.each([
    ["250ms", 250],
    ["5s", 5000],
    ["15m", 900_000],
    ["1h", 3_600_000],
    ["1d", 86_400_000],
    ["1.5s", 1500],
  ])("duration %s = %d ms", (text, ms) => expect(parseDuration(text)).toBe(ms));

  it.each(["5", "5 s", "s", "-1s", "1w", ""])("refuses duration %j", (text) =>
    expect(parseDuration(text)).toBeNull(),
  );

  it("parses rates to a count per period", () => {
    expect(parseRate("5/s")).toEqual({ count: 5, periodMs: 1000 });
    expect(parseRate("100 / m")).toEqual({ count: 100, periodMs: 60_000 });
    expect(parseRate("5000/d")).toEqual({ count: 5000, periodMs: 86_400_000 });
    expect(parseRate("5/w")).toBeNull();
    expect(parseRate("5")).toBeNull();
  });

  it("parses sizes and percentages", () => {
    expect(parseSize("1mb")).toBe(1024 * 1024);
    expect(parseSize("512kb")).toBe(512 * 1024);
    expect(parseSize("100")).toBe(100);
    expect(parseSize("1 tb")).toBeNull();
    expect(parsePercent("50%")).toBe(0.5);
    expect(parsePercent("50")).toBeNull();
  });

  it("reads a window as a duration or one calendar period, singular or plural", () => {
    expect(parseWindow("15m")).toEqual({ window: 900_000 });
    expect(parseWindow("1d")).toEqual({ window: 86_400_000 });
    expect(parseWindow("1 day")).toEqual({ window: { calendar: "day" } });
    expect(parseWindow("1 days")).toEqual({ window: { calendar: "day" } });
    expect(parseWindow("1 week")).toEqual({ window: { calendar: "week" } });
    expect(parseWindow("1 month")).toEqual({ window: { calendar: "month" } });
    expect(parseWindow("1 months")).toEqual({ window: { calendar: "month" } });
    expect(parseWindow("2 months")).toEqual({
      error:
        '"2 months" is not a window: a calendar window is one period, 1 day, 1 week or 1 month; for a rolling window write a duration such as 60d',
    });
    for (const text of ["1month", "1  month", "1 year", "1 Month", "month", "a month", "1.5 days"])
      expect(parseWindow(text), text).toHaveProperty("error");
    expect(formatDuration({ calendar: "week" })).toBe("1 week");
  });

  it("formats durations in the largest whole unit", () => {
    expect(formatDuration(3_600_000)).toBe("1h");
    expect(formatDuration(2000)).toBe("2s");
    expect(formatDuration(1500)).toBe("1500ms");
  });
});
