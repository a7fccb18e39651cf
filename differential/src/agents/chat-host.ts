/**
 * `AiChatToolsWorkload`, the `workload: tools` parent with `host: chat` on the real SDK
 * (`scenarios/workloads/tools.py` in the port): the tools parent (`toolsParent` in `tools.ts`,
 * the same run plans, tables and `workload:*` records as the plain `ToolsWorkload`) on the
 * SDK's own `AIChatAgent`, so a detached run's `notify` and `on_milestones` are narrated in its
 * chat by the SDK's hooks, the replies answered by the scripted model.
 */
import { HarnessedChatAgent } from "./chat-child";
import { toolsParent } from "./tools";

export class AiChatToolsWorkload extends toolsParent(HarnessedChatAgent) {}
