import { MemoryStore } from "../../src/limits/stores/memory.js";
import { settlementConformance } from "./settlement-suite.js";
import { type StoreHarness, storeConformance } from "./suite.js";

const memoryHarness = (): StoreHarness => {
  let now = 1_700_000_000_000;
  // Several "instances" of the memory store must share state to model one process.
  const shared = new MemoryStore({ now: () => now, sweepIntervalMs: 0 });
  return {
    store: async () => shared,
    pttl: async (key) => shared.ttlMs(key),
    advance: async (ms) => {
      now += ms;
    },
  };
};

storeConformance("MemoryStore", memoryHarness);
settlementConformance("MemoryStore", memoryHarness);
