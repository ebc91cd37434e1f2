// The billing export's rows and the CLI's words for it: CSV as RFC 4180 with formula cells
// defused, JSON Lines as they are, money exact to the micro-dollar.
import { describe, expect, it } from "vitest";
import { parseUsageExport } from "../../src/cli/usage-export.js";
import { CSV_HEADER, exportRows, usdText } from "../../src/usage/export-rows.js";

describe("export rows", () => {
  const report = {
    caller: "client:alice",
    period: "2026-12",
    tenant: "acme",
    limits: {
      "pro.monthly": { tokens: 1500, requests: 3, usd: 0.000_125 },
      "pro.requests": { tokens: 0, requests: 3 },
    },
  };

  it("writes a CSV line per budget, money with six places, empty when unpriced", () => {
    expect(CSV_HEADER).toBe("period,tenant,caller,budget,requests,tokens,usd\r\n");
    expect(exportRows(report, "csv")).toBe(
      "2026-12,acme,client:alice,pro.monthly,3,1500,0.000125\r\n2026-12,acme,client:alice,pro.requests,3,0,\r\n",
    );
  });

  it("writes JSON Lines with null for what is absent", () => {
    const lines = exportRows({ ...report, tenant: undefined }, "jsonl")
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines).toEqual([
      {
        period: "2026-12",
        tenant: null,
        caller: "client:alice",
        budget: "pro.monthly",
        requests: 3,
        tokens: 1500,
        usd: 0.000125,
      },
      {
        period: "2026-12",
        tenant: null,
        caller: "client:alice",
        budget: "pro.requests",
        requests: 3,
        tokens: 0,
        usd: null,
      },
    ]);
  });

  it("defuses cells a spreadsheet would run, and quotes what needs quoting", () => {
    const hostile = {
      caller: "client:=HYPERLINK(1)",
      period: "2026-12",
      tenant: '-a,"b"',
      limits: { "@x": { tokens: 1, requests: 1 } },
    };
    expect(exportRows(hostile, "csv")).toBe(`2026-12,"'-a,""b""",client:=HYPERLINK(1),'@x,1,1,\r\n`);
    const leading = { caller: "=cmd", period: "2026-12", limits: { b: { tokens: 1, requests: 1 } } };
    expect(exportRows(leading, "csv")).toBe(`2026-12,,'=cmd,b,1,1,\r\n`);
  });

  it("a tenant's own row names it in the tenant column", () => {
    expect(
      exportRows(
        { caller: "tenant:acme", period: "2026-12", limits: { t: { tokens: 2, requests: 1 } } },
        "csv",
      ),
    ).toBe("2026-12,acme,tenant:acme,t,1,2,\r\n");
  });

  it("spells dollars exactly from micro-dollars", () => {
    expect(usdText(0)).toBe("0.000000");
    expect(usdText(1.5)).toBe("1.500000");
    expect(usdText(0.1 + 0.2)).toBe("0.300000");
    expect(usdText(123_456.789_012)).toBe("123456.789012");
    expect(usdText(-0.25)).toBe("-0.250000");
  });
});

describe("tollgate usage export's words", () => {
  it("takes period, format, by and output once each", () => {
    const p = parseUsageExport([
      "usage",
      "export",
      "--period",
      "2026-12",
      "--format=jsonl",
      "--by",
      "tenant",
      "--output",
      "x.jsonl",
    ]);
    expect(p.kind).toBe("run");
    if (p.kind !== "run") return;
    expect(p.query.toString()).toBe("period=2026-12&format=jsonl&by=tenant");
    expect(p.output).toBe("x.jsonl");
  });
  it("refuses what it does not know, with the usage", () => {
    expect(parseUsageExport(["usage"]).kind).toBe("usage");
    expect(parseUsageExport(["usage", "show"])).toMatchObject({
      kind: "usage",
      message: expect.stringContaining('unknown command "usage show"'),
    });
    expect(parseUsageExport(["usage", "export", "--since", "x"])).toMatchObject({
      message: expect.stringContaining('unknown argument "--since"'),
    });
    expect(parseUsageExport(["usage", "export", "--period"])).toMatchObject({
      message: expect.stringContaining("--period needs a value"),
    });
    expect(parseUsageExport(["usage", "export", "--period", "a", "--period", "b"])).toMatchObject({
      message: expect.stringContaining("given twice"),
    });
    expect(parseUsageExport(["usage", "export", "--help"]).kind).toBe("help");
  });
});
