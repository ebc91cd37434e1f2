// Keyed limits and route budgets on one real redis-server: every limit of a request, route
// budget included, in one check.lua call.
import { redisStores } from "../support/redis-stores.js";
import { keyedConformance } from "./keyed-suite.js";

const env = redisStores(1000);

keyedConformance("RedisStore", () => ({ store: () => env.newStore(), atomic: true }));
