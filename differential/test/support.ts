/**
 * What the step runner (`play.test.ts`) waits with and records by: the quiet-period check that
 * ends every wait (no record, timer or alarm change for a few real milliseconds, and no started
 * work unaccounted for), the error value of a call an eviction or a throw cut short, and the
 * SDK's spelling of a drill-in's child class.
 */
import { type Json, realTimers, shared } from "../src/harness";
import { callsInFlight } from "../src/sdk-work";

const QUIET_ROUND_MS = 5;
/** Quiet rounds in a row (no record, timer, alarm change or constructed instance) that end a
 * wait, once no started work is still unaccounted for (30 ms; 60 and 200 ms were tried and
 * made no story more stable, only every wait longer). */
const QUIET_ROUNDS = 6;
/** A wait gives up after this many rounds (10 s), whatever is still running. */
const SETTLE_ROUNDS_MAX = 2000;

/** Calls, requests and alarm handlers the runner started and that have not finished, each
 * with the timer sequence number when it started: one that has not registered a virtual
 * timer since may still be working (a new incarnation's startup can take a long time on a
 * busy machine), one that has is parked on virtual time. */
export const inFlight = new Set<{ timerSeq: number }>();

function working(): boolean {
  const seq = shared().seq;
  for (const entry of inFlight) if (entry.timerSeq === seq) return true;
  return false;
}

function realPause(ms: number): Promise<void> {
  return new Promise((resolve) => realTimers().setTimeout(resolve, ms));
}

/** Wait until nothing happens for `QUIET_ROUNDS` rounds in a row and every piece of work the
 * runner started, and every call an agent made on another (`src/sdk-work.ts`), has finished
 * or is parked on a virtual timer. */
export async function settle(): Promise<void> {
  const state = shared();
  let last = -1;
  let quiet = 0;
  for (let round = 0; round < SETTLE_ROUNDS_MAX; round++) {
    await realPause(QUIET_ROUND_MS);
    const mark = state.activity + state.records.length * 7 + state.timers.length * 13;
    if (mark === last) quiet += 1;
    else {
      quiet = 0;
      last = mark;
    }
    if (quiet >= QUIET_ROUNDS && !working() && !callsInFlight()) return;
  }
}

/** The abort message of an eviction, before its reason: a call it cuts short fails with it. */
export const RESET_PREFIX = "agent reset: ";

/** A failed call's error as both sides record it (`scenarios/diff/plan.py:error_value`):
 * `{reset: reason}` when an eviction cut it short, else `{error: message}`. */
export function errorValue(error: unknown): Json {
  const message = error instanceof Error ? error.message : String(error);
  const at = message.indexOf(RESET_PREFIX);
  if (at >= 0) return { reset: message.slice(at + RESET_PREFIX.length).trim() };
  return { error: message };
}

export function kebab(name: string): string {
  return name.replace(/([a-z0-9])([A-Z])/g, "$1-$2").toLowerCase();
}
