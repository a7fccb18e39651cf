/**
 * `FiberWorkload`: the player of the `workload: fibers` description on the real SDK, as
 * `scenarios/workloads/fibers.py` plays it in the port. The fibers (`FiberPlan`s), how they
 * start and how recovery treats them come from the plan's options, so one scenario file drives
 * both players: fibers of N sleeping steps that record and stash each step, fail at a scripted
 * step, are cancelled cooperatively (by a call or a deadline schedule), and are resumed,
 * dropped or refused by the recovery hook. The `workload:*` records are the port's, field for
 * field.
 */
import type { FiberContext, FiberRecoveryContext } from "agents";
import { type Json, now, record } from "../harness";
import { HarnessAgent } from "./base";

interface FiberPlan {
  name: string;
  steps: number;
  step_ms: number;
  stash: boolean;
  fail_at: number | null;
  managed: boolean;
  idempotency_key: string | null;
  deadline_ms: number | null;
  recovery: string | null;
}

const MANAGED_DDL =
  "CREATE TABLE IF NOT EXISTS workload_fiber_ids (name TEXT PRIMARY KEY, fiber_id TEXT, " +
  "cancelled_at INTEGER)";
const DDL = [
  "CREATE TABLE IF NOT EXISTS workload_fibers (name TEXT PRIMARY KEY, status TEXT NOT NULL, " +
    "started_at INTEGER NOT NULL, ended_at INTEGER, resumes INTEGER NOT NULL DEFAULT 0)",
  "CREATE TABLE IF NOT EXISTS workload_steps (fiber TEXT NOT NULL, step INTEGER NOT NULL, " +
    "fiber_id TEXT NOT NULL, at_ms INTEGER NOT NULL)"
];

class WorkloadStepFailed extends Error {}
class WorkloadHoldFailed extends Error {}

function stashedStep(snapshot: unknown): number | null {
  const step = (snapshot as { step?: unknown } | null)?.step;
  return typeof step === "number" && Number.isInteger(step) ? step : null;
}

export class FiberWorkload extends HarnessAgent {
  constructor(ctx: DurableObjectState, env: unknown) {
    super(ctx, env);
    for (const statement of DDL) this.exec(statement);
    if (this.plans.some((plan) => plan.managed)) this.exec(MANAGED_DDL);
  }

  private get plans(): FiberPlan[] {
    return this.opt("fibers", []) as unknown as FiberPlan[];
  }

  private plan(name: unknown): FiberPlan | undefined {
    return this.plans.find((plan) => plan.name === name);
  }

  async onStart(): Promise<void> {
    if (this.opt("start_on", "on_start") === "on_start") this.startUnstarted(null);
  }

  async start(name: string | null = null): Promise<string[]> {
    return this.startUnstarted(name);
  }

  async status(): Promise<Record<string, Json>> {
    const rows = this.exec("SELECT name, status FROM workload_fibers ORDER BY started_at, name");
    return Object.fromEntries(rows.map((row) => [String(row.name), row.status]));
  }

  async cancel(name: string, reason = "cancelled by the scenario"): Promise<boolean> {
    const plan = this.plan(name);
    if (!plan?.managed) throw new Error(`no managed fiber named ${name}`);
    return this.cancelPlan(plan, reason);
  }

  /** keepAlive by hand, as the port's `hold`: `depth` leases one inside another, the work
   * inside `keepAliveWhile`, the leases given back innermost first (twice each when `twice`);
   * a failing work gives them back all the same. */
  async hold(ms: number, depth = 1, fail = false, twice = false): Promise<number> {
    const disposers: (() => void)[] = [];
    for (let i = 0; i < depth; i += 1) disposers.push(await this.keepAlive());
    let failed = false;
    try {
      await this.keepAliveWhile(async () => {
        await this.pause(ms);
        if (fail) throw new WorkloadHoldFailed(`the work held for ${ms} ms failed`);
      });
    } catch (error) {
      if (!(error instanceof WorkloadHoldFailed)) throw error;
      failed = true;
    } finally {
      for (const dispose of disposers.reverse()) {
        for (let i = 0; i < (twice ? 2 : 1); i += 1) dispose();
      }
    }
    record(this.name, "workload:held", { depth, ms, failed });
    return depth;
  }

  async workload_fiber_deadline(payload: { name?: string } | null): Promise<void> {
    const plan = this.plan(payload?.name);
    if (plan?.managed) await this.cancelPlan(plan, "deadline");
  }

  private startUnstarted(name: string | null): string[] {
    if (name !== null && !this.plan(name)) throw new Error(`no fiber named ${name}`);
    const started: string[] = [];
    for (const plan of this.plans) {
      if (name !== null && plan.name !== name) continue;
      if (this.exec("SELECT 1 AS x FROM workload_fibers WHERE name = ?", plan.name).length) continue;
      this.exec(
        "INSERT INTO workload_fibers (name, status, started_at) VALUES (?, 'running', ?)",
        plan.name,
        now()
      );
      this.launch(plan, 1, false);
      started.push(plan.name);
    }
    return started;
  }

  private async cancelPlan(plan: FiberPlan, reason: string): Promise<boolean> {
    const at = now();
    this.exec(
      "INSERT INTO workload_fiber_ids (name, cancelled_at) VALUES (?, ?) " +
        "ON CONFLICT (name) DO UPDATE SET cancelled_at = COALESCE(cancelled_at, ?)",
      plan.name,
      at,
      at
    );
    const rows = this.exec("SELECT fiber_id FROM workload_fiber_ids WHERE name = ?", plan.name);
    const fiberId = rows.length ? (rows[0].fiber_id as string | null) : null;
    const cancelled = fiberId !== null && (await this.cancelFiber(fiberId, reason));
    record(this.name, "workload:cancel", { name: plan.name, fiberId, reason, cancelled });
    return cancelled;
  }

  private cancelledMark(plan: FiberPlan): boolean {
    const rows = this.exec("SELECT cancelled_at FROM workload_fiber_ids WHERE name = ?", plan.name);
    return rows.length > 0 && rows[0].cancelled_at !== null;
  }

  private launch(plan: FiberPlan, firstStep: number, continuation: boolean): void {
    void this.runPlan(plan, firstStep, continuation).catch(() => undefined);
  }

  private async runPlan(plan: FiberPlan, firstStep: number, continuation: boolean) {
    const body = async (ctx: FiberContext) => this.steps(plan, ctx, firstStep);
    const key = continuation ? null : plan.idempotency_key;
    try {
      if (plan.managed && plan.deadline_ms !== null && !continuation) {
        await this.schedule(
          Math.ceil(plan.deadline_ms / 1000),
          "workload_fiber_deadline" as never,
          { name: plan.name },
          { idempotent: true }
        );
      }
      if (plan.managed) {
        const started = await this.startFiber(
          plan.name,
          body,
          key ? { idempotencyKey: key } : undefined
        );
        // Known from the answer, before the body runs (if ever), as the port's workload does.
        this.currentExecution(plan, started.fiberId);
      } else {
        await this.runFiber(plan.name, body);
      }
    } catch (error) {
      if (!(error instanceof WorkloadStepFailed)) throw error;
    }
  }

  private currentExecution(plan: FiberPlan, fiberId: string): void {
    this.exec(
      "INSERT INTO workload_fiber_ids (name, fiber_id) VALUES (?, ?) " +
        "ON CONFLICT (name) DO UPDATE SET fiber_id = excluded.fiber_id",
      plan.name,
      fiberId
    );
  }

  private async steps(plan: FiberPlan, ctx: FiberContext, firstStep: number): Promise<void> {
    let aborted: Promise<void> | null = null;
    if (plan.managed) {
      this.currentExecution(plan, ctx.id);
      if (this.cancelledMark(plan)) {
        this.stopCancelled(plan, firstStep);
        return;
      }
      aborted = new Promise((resolve) =>
        ctx.signal.addEventListener("abort", () => resolve(), { once: true })
      );
    }
    for (let step = firstStep; step <= plan.steps; step++) {
      const sleep = this.pause(plan.step_ms);
      await (aborted === null ? sleep : Promise.race([sleep, aborted]));
      if (ctx.signal.aborted) {
        this.stopCancelled(plan, step);
        return;
      }
      if (plan.fail_at === step) {
        this.ended(plan, "failed");
        record(this.name, "workload:fiber_failed", { name: plan.name, step });
        throw new WorkloadStepFailed(`fiber ${plan.name} failed at step ${step} (fail_at)`);
      }
      this.exec(
        "INSERT INTO workload_steps (fiber, step, fiber_id, at_ms) VALUES (?, ?, ?, ?)",
        plan.name,
        step,
        ctx.id,
        now()
      );
      if (plan.stash) {
        ctx.stash({ fiber: plan.name, step });
        record(this.name, "workload:stashed", { fiberId: ctx.id, step });
      }
    }
    this.ended(plan, "done");
    record(this.name, "workload:fiber_done", { name: plan.name });
  }

  private stopCancelled(plan: FiberPlan, step: number): void {
    this.ended(plan, "cancelled");
    record(this.name, "workload:fiber_cancelled", { name: plan.name, step });
  }

  private ended(plan: FiberPlan, status: string): void {
    this.exec(
      "UPDATE workload_fibers SET status = ?, ended_at = ? WHERE name = ?",
      status,
      now(),
      plan.name
    );
  }

  override async onFiberRecovered(ctx: FiberRecoveryContext) {
    const plan = this.plan(ctx.name);
    if (!plan) return super.onFiberRecovered(ctx);
    const step = stashedStep(ctx.snapshot);
    const recovery = plan.recovery ?? (this.opt("recovery", "resume") as string);
    if (recovery === "throw") {
      throw new Error(
        `fiber ${ctx.name} (${ctx.id}) was not recovered: the workload's recovery is throw`
      );
    }
    const cancelled = plan.managed && this.cancelledMark(plan);
    if (recovery === "drop" || cancelled) {
      this.ended(plan, cancelled ? "cancelled" : "dropped");
      record(this.name, "workload:dropped", { fiberId: ctx.id, step });
      return undefined;
    }
    record(this.name, "workload:resumed", { fiberId: ctx.id, step });
    this.exec("UPDATE workload_fibers SET resumes = resumes + 1 WHERE name = ?", plan.name);
    this.launch(plan, (step ?? 0) + 1, true);
    return undefined;
  }
}
