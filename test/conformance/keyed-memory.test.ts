// Keyed limits and route budgets on the memory store: one process, every check synchronous.
import { MemoryStore } from "../../src/limits/stores/memory.js";
import { keyedConformance } from "./keyed-suite.js";

keyedConformance("MemoryStore", () => {
  const shared = new MemoryStore({ now: () => 1_700_000_000_000, sweepIntervalMs: 0 });
  return { store: async () => shared, atomic: true };
});
