/**
 * The scripted model on the real side: the port's `sim.model.ScriptedModel`, played from the
 * description the plan carries (`scenarios/diff/model_plan.py`), so that a chat agent of the
 * real SDK streams the same UI chunks, in the same order, with the same delays and the same
 * finish as the port's model service sends its chat hosts.
 *
 * A request is what the port's turn sends its model (`messages`, the offered `tools`' names,
 * `continuation` when chat recovery continues an interrupted answer). The first rule whose
 * predicates all hold answers (else the default); a rule's replies answer its first match,
 * second match, ... and every later match with the last, counted over the whole play as the
 * port's one model object counts them. The answer is an AI-SDK UI chunk stream (`start`,
 * `text-start` / `text-delta` / `text-end`, `tool-input-available`, `finish`), sent as the
 * server-sent events an `onChatMessage` Response carries; each chunk waits its delay on the
 * harness's virtual timers, owned by the agent, so an evicted agent's stream never goes on.
 */
import { type Json, shared, sleep } from "../harness";

export interface ModelRequest {
  messages: Json[];
  tools: string[];
  continuation?: boolean;
}

interface TextReply {
  text: string;
  chunks: number;
  delay_ms: number | null;
}
interface ToolCallsReply {
  tool_calls: { name: string; input: Json; id: string | null }[];
  text: string | null;
  delay_ms: number | null;
}
interface StallReply {
  stall_ms: number;
  then: Reply | null;
}
interface FailReply {
  fail: string;
  after_chunks: number;
  in_band: boolean;
  partial: string;
  delay_ms: number | null;
}
type Reply = TextReply | ToolCallsReply | StallReply | FailReply;

interface Rule {
  asked: string | null;
  offers: string | null;
  after_tool: string | boolean | null;
  continuing: boolean;
  replies: Reply[];
}

interface Script {
  rules: Rule[];
  default: Reply[];
}

/** One stream event: the delay before it (ms), then a UI chunk or the error the stream fails
 * with (the port's `ModelError`). */
export type ModelEvent = [number, Json | Error];

/** The option class under which the step runner leaves the plan's model services. */
export const MODEL_OPTIONS = "ScriptedModel";

/** Match counters of the current play: keyed by the play's options map, which the runner makes
 * afresh for every play, as the port builds a fresh model for every run. */
const counters = new WeakMap<object, Map<string, number>>();

function scriptOf(service: string): Script {
  const services = (shared().options.get(MODEL_OPTIONS)?.services ?? {}) as unknown as Record<
    string,
    Script
  >;
  const script = services[service];
  if (!script) throw new Error(`the plan carries no model service '${service}'`);
  return script;
}

function partsText(message: Json): string {
  const parts = (message as { parts?: Json[] } | null)?.parts ?? [];
  return parts
    .filter((p) => (p as { type?: string })?.type === "text")
    .map((p) => String((p as { text?: string }).text ?? ""))
    .join("");
}

function asked(request: ModelRequest, needle: string): boolean {
  const users = request.messages.filter((m) => (m as { role?: string })?.role === "user");
  return users.length > 0 && partsText(users[users.length - 1]).includes(needle);
}

function afterTool(request: ModelRequest, tool: string | null): boolean {
  const last = request.messages[request.messages.length - 1] as
    | { role?: string; parts?: { type?: string; state?: string }[] }
    | undefined;
  if (!last || last.role !== "assistant") return false;
  return (last.parts ?? []).some(
    (part) =>
      typeof part?.type === "string" &&
      part.type.startsWith("tool-") &&
      (tool === null || part.type === `tool-${tool}`) &&
      (part.state === "output-available" || part.state === "output-error")
  );
}

function matches(rule: Rule, request: ModelRequest): boolean {
  if (rule.asked !== null && !asked(request, rule.asked)) return false;
  if (rule.offers !== null && !request.tools.includes(rule.offers)) return false;
  if (rule.after_tool !== null && rule.after_tool !== false) {
    if (!afterTool(request, rule.after_tool === true ? null : rule.after_tool)) return false;
  }
  if (rule.continuing && !request.continuation) return false;
  return true;
}

/** The reply `request` gets from `service`, counted as a match of its rule. */
export function replyFor(service: string, request: ModelRequest): Reply {
  const script = scriptOf(service);
  const options = shared().options;
  let used = counters.get(options);
  if (!used) {
    used = new Map();
    counters.set(options, used);
  }
  const nth = (key: string, replies: Reply[]): Reply => {
    const n = used.get(key) ?? 0;
    used.set(key, n + 1);
    return replies[Math.min(n, replies.length - 1)];
  };
  const index = script.rules.findIndex((rule) => matches(rule, request));
  return index >= 0
    ? nth(`${service}#${index}`, script.rules[index].replies)
    : nth(`${service}#default`, script.default);
}

/** `content` in `chunks` contiguous pieces (fewer when shorter), none empty: the port's. */
export function split(content: string, chunks: number): string[] {
  const count = Math.max(1, Math.min(chunks, content.length));
  const size = Math.floor(content.length / count);
  const extra = content.length % count;
  const out: string[] = [];
  let start = 0;
  for (let i = 0; i < count; i++) {
    const end = start + size + (i < extra ? 1 : 0);
    out.push(content.slice(start, end));
    start = end;
  }
  return out;
}

function delay(ms: number | null): number {
  // The plan compiler refuses scripts that leave a delay to the port's seeded latency.
  if (ms === null) throw new Error("a model reply without a delay needs the port's seeded latency");
  return ms;
}

function textEvents(key: string, content: string, chunks: number, ms: number | null): ModelEvent[] {
  if (!content) return [];
  const id = `text_${key}_0`;
  const out: ModelEvent[] = [[0, { type: "text-start", id }]];
  for (const piece of split(content, chunks)) {
    out.push([delay(ms), { type: "text-delta", id, delta: piece }]);
  }
  out.push([0, { type: "text-end", id }]);
  return out;
}

/** The events of one reply; `key` stands for the port's digest of the request's messages. */
export function replyEvents(reply: Reply, key: string): ModelEvent[] {
  if ("stall_ms" in reply) {
    if (reply.then === null) {
      return [[reply.stall_ms, new Error(`model stream stalled: no chunk for ${reply.stall_ms} ms`)]];
    }
    const events = replyEvents(reply.then, key);
    if (events.length) events[0] = [reply.stall_ms + events[0][0], events[0][1]];
    return events;
  }
  if ("fail" in reply) {
    const pieces = Math.max(1, reply.after_chunks - 2);
    const full: ModelEvent[] = [
      [delay(reply.delay_ms), { type: "start" }],
      ...textEvents(key, reply.partial, pieces, reply.delay_ms)
    ];
    const out = full.slice(0, reply.after_chunks);
    const wait = delay(reply.delay_ms);
    if (reply.in_band) return [...out, [wait, { type: "error", errorText: reply.fail }]];
    return [...out, [wait, new Error(reply.fail)]];
  }
  if ("tool_calls" in reply) {
    const out: ModelEvent[] = [[delay(reply.delay_ms), { type: "start" }]];
    out.push(...textEvents(key, reply.text ?? "", 1, reply.delay_ms));
    reply.tool_calls.forEach((call, index) => {
      out.push([
        delay(reply.delay_ms),
        {
          type: "tool-input-available",
          toolCallId: call.id ?? `call_${key}_${index}`,
          toolName: call.name,
          input: call.input ?? {}
        }
      ]);
    });
    out.push([0, { type: "finish" }]);
    return out;
  }
  return [
    [delay(reply.delay_ms), { type: "start" }],
    ...textEvents(key, reply.text, reply.chunks, reply.delay_ms),
    [0, { type: "finish" }]
  ];
}

/** A digest of the request's messages (12 hex digits): the same request gets the same ids. */
export async function requestKey(request: ModelRequest): Promise<string> {
  const bytes = new TextEncoder().encode(JSON.stringify(request.messages));
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return [...digest.slice(0, 6)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** The model's answer to `request` as the events it streams. */
export async function modelEvents(service: string, request: ModelRequest): Promise<ModelEvent[]> {
  return replyEvents(replyFor(service, request), await requestKey(request));
}

/** The events as an `onChatMessage` Response: one server-sent event per chunk, each after its
 * delay on `owner`'s virtual timers (a zero delay sends at once); an error event fails the
 * body. */
export function sseResponse(owner: string, events: ModelEvent[]): Response {
  const encoder = new TextEncoder();
  let next = 0;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (next >= events.length) {
        controller.close();
        return;
      }
      const [ms, chunk] = events[next++];
      if (ms > 0) await sleep(owner, ms);
      if (chunk instanceof Error) {
        controller.error(chunk);
        return;
      }
      controller.enqueue(encoder.encode(`data: ${JSON.stringify(chunk)}\n\n`));
    }
  });
  return new Response(body, { headers: { "content-type": "text/event-stream" } });
}
