export * from "./arbiter.js"; export * from "./config.js"; export * from "./clock.js"; export * from "./server/runtime.js"; export * from "./store/sqlite.js"; export * from "./store/store.js";
