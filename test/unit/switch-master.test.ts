import { describe, expect, it } from "vitest";
import { switchedTo } from "../../src/limits/stores/redis/switch-master.js";

describe("switchedTo: the new master a +switch-master message names", () => {
  it("is the last address of a message about our master", () => {
    expect(switchedTo("mymaster", "mymaster 127.0.0.1 6379 127.0.0.1 6380")).toBe("127.0.0.1:6380");
    expect(switchedTo("mymaster", "mymaster ::1 6379 ::1 6380")).toBe("::1:6380");
  });

  it("is nothing for another master's switch or a malformed message", () => {
    expect(switchedTo("mymaster", "other 127.0.0.1 6379 127.0.0.1 6380")).toBeUndefined();
    expect(switchedTo("mymaster", "mymaster 127.0.0.1 6379 127.0.0.1")).toBeUndefined();
    expect(switchedTo("mymaster", "mymaster 127.0.0.1 6379 127.0.0.1 port")).toBeUndefined();
    expect(switchedTo("mymaster", "")).toBeUndefined();
  });
});
