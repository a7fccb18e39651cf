/**
 * The worker the differential stage runs in workerd: it exports every agent class the plans
 * may name (each bound to a Durable Object namespace of the same name in `wrangler.jsonc`).
 * Requests reach agents through the step runner's stubs, never through this fetch handler.
 */
export { ChatToolChild } from "./agents/chat-child";
export { AiChatToolsWorkload } from "./agents/chat-host";
export { AiChatWorkload } from "./agents/chat-workload";
export { Counter } from "./agents/counter";
export { FiberWorkload } from "./agents/fibers";
export { ScriptedToolChild } from "./agents/scripted-child";
export { ScheduleWorkload } from "./agents/schedules";
export { ToolsWorkload } from "./agents/tools";
export {
  MiddleChild,
  SlowFinishParent,
  StoryChild,
  StoryParent,
  StubbornChild
} from "./agents/agent-tool-stories";
export {
  Batcher,
  Digest,
  Exporter,
  PoisonedResearcher,
  Researcher,
  SlowRecoveryResearcher,
  StrictWebhooks,
  Webhooks
} from "./agents/stories";

export default {
  async fetch(): Promise<Response> {
    return new Response("the differential worker is driven by its step runner", { status: 404 });
  }
};
