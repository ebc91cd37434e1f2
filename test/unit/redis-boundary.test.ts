// Every error of the Redis client leaves the adapter as a StoreError with its reason, the
// original as `cause`: nobody past the adapter reads a client's message to classify a failure.
import { ReplyError } from "ioredis";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  StoreConnectionError,
  StoreReplyError,
  StoreTimeoutError,
  storeFailureReason,
} from "../../src/errors.js";
import { Boundary, toStoreError } from "../../src/limits/stores/redis/boundary.js";

describe("toStoreError", () => {
  it.each([
    [new ReplyError("NOSCRIPT No matching script"), StoreReplyError, "script"],
    [new ReplyError("CLUSTERDOWN The cluster is down"), StoreReplyError, "script"],
    [new Error("Command timed out"), StoreTimeoutError, "timeout"],
    [
      new Error("Stream isn't writeable and enableOfflineQueue options is false"),
      StoreConnectionError,
      "connection",
    ],
    [new Error("Connection is closed."), StoreConnectionError, "connection"],
    [
      Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" }),
      StoreConnectionError,
      "connection",
    ],
    ["not even an Error", StoreConnectionError, "connection"],
  ] as const)("%s → %s", (err, type, reason) => {
    const converted = toStoreError(err, 250);
    expect(converted).toBeInstanceOf(type);
    expect(converted.reason).toBe(reason);
    expect(storeFailureReason(converted)).toBe(reason);
    expect(converted.cause).toBe(err);
  });

  it("keeps a StoreError as it is", () => {
    const timeout = new StoreTimeoutError(100);
    expect(toStoreError(timeout, 250)).toBe(timeout);
    const unreadable = new StoreReplyError("unexpected reply from the limit script: expected integers");
    expect(toStoreError(unreadable, 250)).toBe(unreadable);
  });
});

describe("Boundary", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("turns a rejection into a StoreError", async () => {
    const boundary = new Boundary(100);
    const err = await boundary.bounded(Promise.reject(new ReplyError("ERR boom"))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreReplyError);
  });

  it("fails a call that outlives the store timeout with a StoreTimeoutError", async () => {
    vi.useFakeTimers();
    const boundary = new Boundary(100);
    const never = new Promise<never>(() => {});
    const outcome = boundary.bounded(never).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(99);
    let settled = false;
    void outcome.then(() => {
      settled = true;
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(10);
    const err = await outcome;
    expect(err).toBeInstanceOf(StoreTimeoutError);
    expect(storeFailureReason(err)).toBe("timeout");
  });

  it("passes an answer through", async () => {
    await expect(new Boundary(100).bounded(Promise.resolve(7))).resolves.toBe(7);
  });
});
