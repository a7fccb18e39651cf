/**
 * `ScriptedToolChild`, the agent-tool child of the `workload: tools` player on the real SDK
 * (`scenarios/workloads/children.py` in the port): it plays the script a run's input carries
 * (`{"steps": [...], "resume": bool}`), the very value the port's child receives, statement for
 * statement (the same tables and rows). It implements the SDK's `AgentToolChildAdapter` by
 * hand; its live tail is the SDK's byte stream of JSON lines (`{sequence, body}`), which is
 * what the port's open/read/close tail carries. The story children (`agent-tool-stories.ts`)
 * extend it with the stories' extra steps.
 */
import type { Json } from "../harness";
import { HarnessAgent } from "./base";

/** The SDK's clock (epoch ms on the virtual `Date`), which the port's host clock stands for:
 * the SDK compares the child's signal times with `Date.now()`. */
export function now(): number {
  return Date.now();
}

const CHILD_DDL = [
  "CREATE TABLE IF NOT EXISTS child_runs (run_id TEXT PRIMARY KEY, status TEXT, summary TEXT, " +
    "output_json TEXT, error TEXT, started_at INTEGER, completed_at INTEGER, progress_json TEXT, " +
    "last_signal_at INTEGER)",
  "CREATE TABLE IF NOT EXISTS child_chunks (run_id TEXT, seq INTEGER, body TEXT, " +
    "PRIMARY KEY (run_id, seq))",
  "CREATE TABLE IF NOT EXISTS child_milestones (run_id TEXT, sequence INTEGER, name TEXT, " +
    "data_json TEXT, at INTEGER, PRIMARY KEY (run_id, sequence))",
  "CREATE TABLE IF NOT EXISTS child_scripts (run_id TEXT PRIMARY KEY, steps_json TEXT, " +
    "resume INTEGER NOT NULL, cursor INTEGER NOT NULL DEFAULT 0, sleep_until INTEGER)"
];

/** `json.dumps(value, separators=(",", ":"))`, as the port writes its JSON cells. */
export function compact(value: Json | undefined): string {
  return JSON.stringify(value ?? null);
}

export interface Deferred {
  promise: Promise<void>;
  resolve: () => void;
}

export function deferred(): Deferred {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

interface Tail {
  runId: string;
  controller: ReadableStreamDefaultController<Uint8Array>;
  closed: boolean;
}

export class ScriptedToolChild extends HarnessAgent {
  /** Whether a new incarnation resumes a run whose input does not say. */
  protected resumeDefault = true;
  private readonly tails = new Set<Tail>();
  private readonly liveSequence = new Map<string, number>();
  protected readonly stops = new Map<string, Deferred>();
  /** run id -> the error of a cancel whose seal failed, for its stopped script to seal. */
  private readonly cancels = new Map<string, string | null>();
  private readonly encoder = new TextEncoder();
  /** run id -> resolved once its script reached its first wait (or its end) in this incarnation:
   * a tail opens only then. Within one instant the port's child plays the steps before its
   * first wait before the parent's tail can open; on workerd the two race over RPC, so the
   * tail waits for them to keep the same order (a first progress frame is never live). */
  private readonly ready = new Map<string, Deferred>();

  constructor(ctx: DurableObjectState, env: unknown) {
    super(ctx, env);
    for (const statement of CHILD_DDL) this.exec(statement);
  }

  async onStart(): Promise<void> {
    this.registerFacet();
    const pending = this.exec(
      "SELECT s.run_id, s.steps_json FROM child_scripts s JOIN child_runs r " +
        "ON r.run_id = s.run_id WHERE r.completed_at IS NULL AND s.resume = 1 ORDER BY s.rowid"
    );
    for (const row of pending) {
      this.resumeRun(String(row.run_id), JSON.parse(String(row.steps_json)) as Json[][]);
    }
  }

  protected resumeRun(runId: string, steps: Json[][]): void {
    this.play(runId, steps);
  }

  // -- the adapter ---------------------------------------------------------------------------
  async startAgentToolRun(input: Json, options: { runId: string }): Promise<Json> {
    this.registerFacet();
    const runId = options.runId;
    const existing = await this.inspectAgentToolRun(runId);
    if (existing !== null) return existing;
    const at = now();
    const script = (input && typeof input === "object" && !Array.isArray(input) ? input : {}) as {
      steps?: Json[][];
      resume?: boolean;
    };
    const steps = script.steps && script.steps.length ? script.steps : [["finish", "completed", "done"]];
    this.exec(
      "INSERT OR REPLACE INTO child_scripts (run_id, steps_json, resume) VALUES (?, ?, ?)",
      runId,
      compact(steps),
      (script.resume ?? this.resumeDefault) ? 1 : 0
    );
    this.exec(
      "INSERT INTO child_runs (run_id, status, started_at) VALUES (?, 'running', ?)",
      runId,
      at
    );
    this.play(runId, steps);
    return { runId, status: "running", startedAt: at };
  }

  async cancelAgentToolRun(runId: string, reason?: unknown): Promise<void> {
    this.cancelRun(runId, reason);
  }

  /** Stop the script, then seal the run `aborted`; true when this call sealed it. */
  protected cancelRun(runId: string, reason: unknown): boolean {
    const error = reason === undefined || reason === null ? null : String(reason);
    this.cancels.set(runId, error);
    this.stop(runId);
    const sealed = this.settle(runId, "aborted", { error });
    this.cancels.delete(runId);
    return sealed;
  }

  async inspectAgentToolRun(runId: string): Promise<Json> {
    const rows = this.exec("SELECT * FROM child_runs WHERE run_id = ?", runId);
    if (!rows.length) return null;
    const row = rows[0];
    const out: Record<string, Json> = { runId, status: row.status, startedAt: row.started_at };
    if (row.summary !== null) out.summary = row.summary;
    if (row.error !== null) out.error = row.error;
    if (row.completed_at !== null) out.completedAt = row.completed_at;
    if (row.output_json !== null) out.output = JSON.parse(String(row.output_json)) as Json;
    if (row.progress_json !== null && row.last_signal_at !== null) {
      out.progress = {
        ...(JSON.parse(String(row.progress_json)) as Record<string, Json>),
        at: row.last_signal_at
      };
    }
    const milestones = this.exec(
      "SELECT name, sequence, at, data_json FROM child_milestones WHERE run_id = ? ORDER BY sequence",
      runId
    );
    if (milestones.length) {
      out.milestones = milestones.map((m) => ({
        name: m.name,
        sequence: m.sequence,
        at: m.at,
        ...(m.data_json ? { data: JSON.parse(String(m.data_json)) as Json } : {})
      }));
    }
    return out;
  }

  async getAgentToolChunks(
    runId: string,
    options?: { afterSequence?: number }
  ): Promise<{ sequence: number; body: string }[]> {
    return this.storedChunks(runId, options?.afterSequence ?? -1);
  }

  private storedChunks(runId: string, after: number): { sequence: number; body: string }[] {
    const rows = this.exec(
      "SELECT seq, body FROM child_chunks WHERE run_id = ? AND seq > ? ORDER BY seq",
      runId,
      after
    );
    return rows.map((r) => ({ sequence: Number(r.seq), body: String(r.body) }));
  }

  async tailAgentToolRun(
    runId: string,
    options?: { afterSequence?: number }
  ): Promise<ReadableStream<Uint8Array>> {
    await this.ready.get(runId)?.promise;
    const stored = this.storedChunks(runId, options?.afterSequence ?? -1);
    const known = this.exec("SELECT 1 AS x FROM child_runs WHERE run_id = ?", runId).length > 0;
    const closeNow = !known || this.isSettled(runId);
    let tail: Tail | null = null;
    return new ReadableStream<Uint8Array>({
      start: (controller) => {
        for (const chunk of stored) controller.enqueue(this.line(chunk.sequence, chunk.body, chunk.sequence));
        if (closeNow) {
          controller.close();
          return;
        }
        tail = { runId, controller, closed: false };
        this.tails.add(tail);
      },
      cancel: () => {
        if (tail) {
          tail.closed = true;
          this.tails.delete(tail);
        }
      }
    });
  }

  private line(sequence: number, body: string, chunkSequence: number | null): Uint8Array {
    return this.encoder.encode(`${JSON.stringify({ sequence, body, chunkSequence })}\n`);
  }

  // -- the script ----------------------------------------------------------------------------
  private play(runId: string, steps: Json[][]): void {
    const ready = deferred();
    this.ready.set(runId, ready);
    this.ctx.waitUntil(this.playLeased(runId, steps).catch(() => undefined).finally(ready.resolve));
  }

  private async playLeased(runId: string, steps: Json[][]): Promise<void> {
    try {
      await this.keepAliveWhile(() => this.drive(runId, steps));
    } catch (error) {
      const message = error instanceof Error ? error.message || error.name : String(error);
      this.settle(runId, "error", { error: message });
      throw error;
    }
  }

  private async drive(runId: string, steps: Json[][]): Promise<void> {
    const place = this.exec("SELECT cursor FROM child_scripts WHERE run_id = ?", runId);
    await this.perform(runId, steps, place.length ? Number(place[0].cursor) : 0);
    if (this.cancels.has(runId)) {
      this.settle(runId, "aborted", { error: this.cancels.get(runId) ?? null });
      this.cancels.delete(runId);
    }
  }

  private async perform(runId: string, steps: Json[][], start: number): Promise<void> {
    for (let index = start; index < steps.length; index++) {
      if (this.cancels.has(runId) || this.isSettled(runId)) return;
      if (!(await this.step(runId, index, steps[index])) || this.cancels.has(runId)) return;
      this.advance(runId, index);
    }
  }

  protected advance(runId: string, index: number): void {
    this.exec(
      "UPDATE child_scripts SET cursor = ?, sleep_until = NULL WHERE run_id = ?",
      index + 1,
      runId
    );
  }

  /** Run step `index`; false when the script ends here. */
  protected async step(runId: string, _index: number, step: Json[]): Promise<boolean> {
    if (step[0] === "hang") await this.waitFor(runId, new Promise<void>(() => undefined));
    else if (step[0] === "sleep") await this.sleepStep(runId, Number(step[1]));
    else this.act(runId, step);
    return true;
  }

  /** Wait on behalf of the run, or less if the run is settled meanwhile (a cancel). */
  protected async waitFor(runId: string, promise: Promise<void>): Promise<void> {
    this.ready.get(runId)?.resolve();
    let stop = this.stops.get(runId);
    if (!stop) {
      stop = deferred();
      this.stops.set(runId, stop);
    }
    await Promise.race([promise, stop.promise]);
  }

  private async sleepStep(runId: string, ms: number): Promise<void> {
    const at = now();
    const rows = this.exec("SELECT sleep_until FROM child_scripts WHERE run_id = ?", runId);
    let until = rows.length ? (rows[0].sleep_until as number | null) : null;
    if (until === null) {
      until = at + ms;
      this.exec("UPDATE child_scripts SET sleep_until = ? WHERE run_id = ?", until, runId);
    }
    await this.pauseFor(runId, until - at);
  }

  /** Let the rest of a sleep pass. */
  protected async pauseFor(runId: string, remainingMs: number): Promise<void> {
    if (remainingMs > 0) await this.waitFor(runId, this.pause(remainingMs));
  }

  private act(runId: string, step: Json[]): void {
    const kind = step[0];
    const at = now();
    if (kind === "text") {
      this.storeChunk(runId, { type: "text-delta", id: "t", delta: step[1] });
    } else if (kind === "chunk") {
      const chunk = step[1] as Record<string, Json>;
      if (chunk.transient === true) this.push(runId, chunk, null);
      else this.storeChunk(runId, chunk);
    } else if (kind === "progress") {
      this.exec(
        "UPDATE child_runs SET progress_json = ?, last_signal_at = ? WHERE run_id = ?",
        compact(step[1]),
        at,
        runId
      );
      this.push(runId, { type: "data-agent-progress", transient: true, data: step[1] }, null);
    } else if (kind === "milestone") {
      this.milestone(runId, String(step[1]), step.length > 2 ? step[2] : null, at);
    } else if (kind === "finish" && step[1] === "completed") {
      this.settle(runId, "completed", {
        summary: step.length > 2 ? (step[2] as string) : "",
        output: step.length > 3 ? step[3] : null
      });
    } else if (kind === "finish") {
      this.settle(runId, String(step[1]), { error: step.length > 2 ? (step[2] as string) : null });
    }
  }

  private milestone(runId: string, name: string, data: Json, at: number): void {
    const sequence = Number(
      this.exec(
        "SELECT COALESCE(MAX(sequence), -1) + 1 AS n FROM child_milestones WHERE run_id = ?",
        runId
      )[0].n
    );
    this.exec(
      "INSERT INTO child_milestones VALUES (?, ?, ?, ?, ?)",
      runId,
      sequence,
      name,
      data === null ? null : compact(data),
      at
    );
    this.exec("UPDATE child_runs SET last_signal_at = ? WHERE run_id = ?", at, runId);
    const payload: Record<string, Json> = { name, sequence, at };
    if (data !== null) payload.data = data;
    this.storeChunk(runId, { type: "data-agent-milestone", data: payload });
  }

  private storeChunk(runId: string, chunk: Record<string, Json>): void {
    const seq = Number(
      this.exec("SELECT COALESCE(MAX(seq), -1) + 1 AS n FROM child_chunks WHERE run_id = ?", runId)[0].n
    );
    this.exec("INSERT INTO child_chunks VALUES (?, ?, ?)", runId, seq, compact(chunk));
    this.push(runId, chunk, seq);
  }

  private push(runId: string, chunk: Record<string, Json>, chunkSequence: number | null): void {
    const sequence = this.liveSequence.get(runId) ?? 0;
    this.liveSequence.set(runId, sequence + 1);
    for (const tail of this.tails) {
      if (tail.runId === runId && !tail.closed) {
        tail.controller.enqueue(this.line(sequence, compact(chunk), chunkSequence));
      }
    }
  }

  /** Settle the run once; true when this call did. */
  protected settle(
    runId: string,
    status: string,
    fields: { summary?: string | null; error?: string | null; output?: Json }
  ): boolean {
    const cursor = this.ctx.storage.sql.exec(
      "UPDATE child_runs SET status = ?, summary = ?, error = ?, output_json = ?, " +
        "completed_at = ? WHERE run_id = ? AND completed_at IS NULL",
      status,
      fields.summary ?? null,
      fields.error ?? null,
      fields.output === undefined || fields.output === null ? null : compact(fields.output),
      now(),
      runId
    );
    const changed = cursor.rowsWritten > 0;
    if (changed) {
      this.stop(runId);
      for (const tail of [...this.tails]) {
        if (tail.runId !== runId) continue;
        tail.closed = true;
        this.tails.delete(tail);
        try {
          tail.controller.close();
        } catch {
          // the reader went away first
        }
      }
    }
    return changed;
  }

  protected stop(runId: string): void {
    const stop = this.stops.get(runId);
    this.stops.delete(runId);
    stop?.resolve();
  }

  private isSettled(runId: string): boolean {
    const rows = this.exec("SELECT completed_at FROM child_runs WHERE run_id = ?", runId);
    return rows.length > 0 && rows[0].completed_at !== null;
  }
}
