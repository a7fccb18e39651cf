/**
 * `Counter`, the workload `scenarios.workloads:Counter` plays in the port: each count is one
 * turn that inserts a `counts` row and updates the state together. Method names are the
 * scenario's (snake_case), so a plan's `call` names the same method on both sides.
 */
import { type Json, BASE_MS, now } from "../harness";
import { HarnessAgent } from "./base";

const COUNTS_DDL =
  "CREATE TABLE IF NOT EXISTS counts (" +
  "id INTEGER PRIMARY KEY, source TEXT NOT NULL, at_ms INTEGER NOT NULL)";

export class Counter extends HarnessAgent {
  initialState = { count: 0 };

  async onStart(): Promise<void> {
    this.exec(COUNTS_DDL);
  }

  private count(source: string): number {
    this.exec(COUNTS_DDL);
    this.exec("INSERT INTO counts (source, at_ms) VALUES (?, ?)", source, now());
    const state = this.state as { count: number };
    const count = Number(state.count) + 1;
    this.setState({ ...state, count });
    return count;
  }

  async increment(): Promise<number> {
    return this.count("increment");
  }

  async work(steps = 5): Promise<number> {
    let count = Number((this.state as { count: number }).count);
    for (let i = 0; i < steps; i++) {
      count = this.count("work");
      await this.pause(this.opt("step_ms", 1000));
    }
    return count;
  }

  async fail(message = "asked to fail"): Promise<void> {
    throw new Error(message);
  }

  async arm(afterMs: number): Promise<number> {
    const at = now() + afterMs;
    await this.ctx.storage.setAlarm(BASE_MS + at);
    return at;
  }

  override onAlarm(): void {
    this.count("alarm");
  }

  async onRequest(request: Request): Promise<Response> {
    const state = this.state as { count: Json };
    if (request.method === "GET") return Response.json({ count: state.count });
    if (request.method === "POST") return Response.json({ count: this.count("request") });
    return new Response(`method ${request.method} not allowed; use GET or POST`, { status: 405 });
  }
}
