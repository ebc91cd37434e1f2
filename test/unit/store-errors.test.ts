// Store failures in an operator's words (src/observability/store-errors.ts): the address without
// credentials, the cause in words, never the Redis client's own text.
import { describe, expect, it } from "vitest";
import {
  BreakerOpenError,
  StoreReplyError,
  StoreTimeoutError,
  StoreUnavailableError,
} from "../../src/errors.js";
import { toStoreError } from "../../src/limits/stores/redis/boundary.js";
import { StoreErrors, storeAddress } from "../../src/observability/store-errors.js";

const socketError = (code: string, message = `connect ${code} 10.1.2.3:6379`) =>
  Object.assign(new Error(message), { code, syscall: "connect" });
const replyError = (message: string) => Object.assign(new Error(message), { name: "ReplyError" });
const NOT_CONNECTED = new Error("Stream isn't writeable and enableOfflineQueue options is false");

describe("storeAddress", () => {
  it("is host:port, without user or password", () => {
    expect(storeAddress({ url: "redis://:hunter2@redis.internal:6380/2" })).toBe("redis.internal:6380");
    expect(storeAddress({ url: "rediss://app:hunter2@redis.internal" })).toBe("redis.internal:6379");
    expect(storeAddress({ url: "redis://[::1]:7000" })).toBe("[::1]:7000");
    expect(storeAddress({ url: "memory://" })).toBe("memory");
    expect(
      storeAddress({
        url: "redis-cluster://",
        cluster: ["redis://:pw@10.0.0.1:7000", "redis://10.0.0.2:7001"],
      }),
    ).toBe("10.0.0.1:7000, 10.0.0.2:7001");
    expect(
      storeAddress({
        url: "redis-sentinel://",
        sentinel: { name: "main", nodes: ["s1:26379", "redis://s2"] },
      }),
    ).toBe('s1:26379, s2:26379 (sentinels of "main")');
  });
});

describe("StoreErrors.describe", () => {
  const at = "redis.internal:6379";

  it.each([
    ["ECONNREFUSED", "connection refused"],
    ["ETIMEDOUT", "connection timed out"],
    ["ENOTFOUND", "host not found"],
    ["EHOSTUNREACH", "host unreachable"],
    ["ECONNRESET", "connection reset"],
  ])(
    "a command refused while not connected takes the cause of the last failed connection: %s",
    (code, words) => {
      const errors = new StoreErrors(at);
      errors.connectionFailed(socketError(code));
      expect(errors.describe(NOT_CONNECTED)).toBe(`limit store unreachable at ${at} (${words})`);
      // A socket error met by a command says the same.
      expect(new StoreErrors(at).describe(socketError(code))).toBe(
        `limit store unreachable at ${at} (${words})`,
      );
    },
  );

  it("authentication failures, from the connection's error, in words", () => {
    const errors = new StoreErrors(at);
    errors.connectionFailed(replyError("WRONGPASS invalid username-password pair or user is disabled."));
    expect(errors.describe(NOT_CONNECTED)).toBe(
      `limit store unreachable at ${at} (authentication failed: wrong user name or password in the store URL)`,
    );
    errors.connectionFailed(new Error("Ready check failed: NOAUTH Authentication required."));
    expect(errors.describe(NOT_CONNECTED)).toContain(
      "authentication required: the store URL has no password",
    );
  });

  it("before any failure, and once connected again, just 'not connected yet'", () => {
    const errors = new StoreErrors(at);
    expect(errors.describe(NOT_CONNECTED)).toBe(`limit store unreachable at ${at} (not connected yet)`);
    errors.connectionFailed(socketError("ECONNREFUSED"));
    errors.connected();
    expect(errors.describe(new Error("Connection is closed."))).toBe(
      `limit store unreachable at ${at} (not connected yet)`,
    );
  });

  it("timeouts, Redis's refusals, the breaker and unreadable replies", () => {
    const errors = new StoreErrors(at);
    expect(errors.describe(new StoreTimeoutError(250))).toBe(
      `limit store at ${at} did not answer within 250 ms`,
    );
    expect(errors.describe(new Error("Command timed out"))).toBe(
      `limit store at ${at} did not answer in time`,
    );
    expect(errors.describe(new StoreUnavailableError("timeout", new StoreTimeoutError(100)))).toBe(
      `limit store at ${at} did not answer within 100 ms`,
    );
    expect(errors.describe(replyError("LOADING Redis is loading the dataset in memory"))).toBe(
      `limit store at ${at} refused the command: Redis is loading its dataset`,
    );
    expect(errors.describe(replyError("READONLY You can't write against a read only replica."))).toBe(
      `limit store at ${at} refused the command: it is a read-only replica: the store URL must name the master`,
    );
    expect(errors.describe(replyError("ERR user_script:12: something about key tollgate:{c:acme}"))).toBe(
      `limit store at ${at} refused the command: Redis answered with the error ERR`,
    );
    expect(errors.describe(new BreakerOpenError())).toContain("circuit breaker is open");
    expect(errors.describe(new StoreReplyError("expected integers"))).toContain(
      "a reply the gateway cannot read",
    );
  });

  it("reads the client's error inside what the Redis adapter wrapped it in", () => {
    const errors = new StoreErrors(at);
    expect(
      errors.describe(toStoreError(replyError("LOADING Redis is loading the dataset in memory"), 100)),
    ).toBe(errors.describe(replyError("LOADING Redis is loading the dataset in memory")));
    expect(errors.describe(toStoreError(replyError("READONLY You can't write"), 100))).toContain(
      "read-only replica",
    );
    expect(errors.describe(toStoreError(socketError("ECONNREFUSED"), 100))).toBe(
      errors.describe(socketError("ECONNREFUSED")),
    );
  });

  it("never repeats the client's text, whatever it was", () => {
    const errors = new StoreErrors(at);
    const text = errors.describe(
      Object.assign(new Error("weird ioredis internals: password=hunter2"), { name: "Error" }),
    );
    expect(text).toBe(`limit store at ${at} failed (unexpected error; see the gateway's log)`);
  });
});
