//! The OpenAPI 3.1 description of the API, written by hand next to the handlers.

use super::*;

pub(super) async fn openapi() -> Json<Value> {
    Json(openapi_document())
}

/// The OpenAPI 3.1 description of the API (written by hand next to the handlers above).
pub fn openapi_document() -> Value {
    let bearer = json!([{ "bearer": [] }]);
    let id =
        json!({ "name": "id", "in": "path", "required": true, "schema": { "type": "integer" } });
    let name =
        json!({ "name": "name", "in": "path", "required": true, "schema": { "type": "string" } });
    let query = |name: &str, schema: Value, description: &str| json!({ "name": name, "in": "query", "required": false, "schema": schema, "description": description });
    let tenant_param = query(
        "tenant",
        json!({ "type": "string" }),
        "admin only: this tenant (400 if unknown)",
    );
    json!({
        "openapi": "3.1.0",
        "info": { "title": "Arbiter", "version": env!("CARGO_PKG_VERSION"), "description": "GPU cluster scheduler daemon. Errors: {\"error\": ..., \"field\": ...}." },
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "schemas": {
                "SubmitRequest": {
                    "type": "object", "required": ["command"], "additionalProperties": false,
                    "properties": {
                        "command": { "type": "string" }, "working_dir": { "type": "string" },
                        "env": { "type": "object", "additionalProperties": { "type": "string" } },
                        "gpus": { "type": "integer", "minimum": 1, "default": 1 },
                        "gpu_types": { "type": "array", "items": { "type": "string" } },
                        "max_gpus": { "type": "integer", "description": "elastic job: runs on gpus..max_gpus GPUs" },
                        "cpus": { "type": "integer" }, "memory_gib": { "type": "integer" },
                        "priority": { "type": "integer" }, "deadline_unix_s": { "type": "integer" },
                        "max_run_time_s": { "type": "integer" }, "expected_run_time_s": { "type": "integer" },
                        "checkpoint_dir": { "type": "string" }, "checkpoint_signal": { "type": "string", "default": "TERM" },
                        "grace_s": { "type": "integer", "default": 30 }, "max_retries": { "type": "integer", "default": 2 },
                        "name": { "type": "string", "description": "for people, at most 256 bytes; no character of the Unicode general categories Cc, Cf, Zl, Zp (nor may any other one-line text)" },
                        "client_request_id": { "type": "string", "description": "idempotency key (or the Idempotency-Key header): a repeat by the same tenant returns the first job" },
                        "min_run_time_s": { "type": "integer", "description": "seconds a started run is protected from preemption (default: the daemon's min_run_s)" },
                        "opportunistic": { "type": "boolean", "default": false, "description": "run only on idle GPUs, outside the policy, quotas and fair shares; yield at once (at most 5 s of grace) to a placed job" },
                        "iteration_stages": { "$ref": "#/components/schemas/IterationStages" },
                        "priority_class": { "type": "string", "maxLength": 64, "description": "priority class, one the admin configured ([[priority_classes]]) and granted to the tenant (GET /v1/cluster lists them): a higher class is served first and may preempt a lower, preemptible one; the policy orders jobs within a class. Default: the configured default_priority_class. 400 for a class that does not exist or is not granted" },
                        "dependency": { "type": "string", "maxLength": 16384, "description": "Slurm's --dependency syntax: afterok:ID[:ID...], afternotok:ID, afterany:ID, after:ID, singleton (needs name), items separated by `,` (all must hold). Only the caller's own jobs that exist (another tenant's id is 'not found'). The job waits ('waiting for job 12 (afterok)') and fails with 'DependencyNeverSatisfied: ...' when a dependency can no longer hold" },
                        "array": { "type": "string", "description": "a job array, Slurm's --array syntax: 0-99, 1,3,5-7, 0-15:4, with %N for at most N tasks running at once; one job per task (consecutive ids, the first is the array's id), each told ARBITER_ARRAY_JOB_ID/TASK_ID/TASK_COUNT; at most max_array_size tasks, each counted against max_queued_per_tenant. The answer carries `array_tasks`" },
                        "user": { "type": "string", "pattern": "^[A-Za-z0-9._@-]{1,64}$", "description": "who in the tenant submits (arbiter submit sends $USER): a label for GET /v1/usage?by=user, as the client says it" },
                        "job_type": { "type": "string", "pattern": "^[A-Za-z0-9._:/+-]{1,128}$", "description": "what kind of job this is, within the tenant (another tenant's type of the same name is another type): the daemon learns from progress reports how fast each type runs next to each other type on the same GPUs (GET /v1/pairs), and gandiva, max-min-fairness-packed and horus pair jobs by it" }
                    }
                },
                "IterationStages": {
                    "type": "object", "required": ["io_s", "cpu_s", "gpu_s"], "additionalProperties": false,
                    "description": "one training iteration's time on each resource, seconds (each finite and >= 0, at most 86400; their sum, the iteration alone, 1e-6 to 86400). Muri's policies (muri-s, muri-l) interleave jobs whose iterations stress different resources on the same GPUs; without it a job runs alone under them",
                    "properties": {
                        "io_s": { "type": "number", "minimum": 0, "maximum": 86400, "description": "reading input from storage" },
                        "cpu_s": { "type": "number", "minimum": 0, "maximum": 86400, "description": "CPU work (preprocessing)" },
                        "gpu_s": { "type": "number", "minimum": 0, "maximum": 86400, "description": "GPU compute" }
                    }
                },
                "SharedGpus": {
                    "type": "object", "required": ["gpus"],
                    "description": "another job holding GPUs this job holds (co-located by the policy): its id when the caller may see it (same tenant, or the admin); another tenant's job only as the shared GPUs with other_tenant: true",
                    "properties": { "id": { "type": "integer" }, "gpus": { "type": "array", "items": { "type": "integer" } }, "other_tenant": { "type": "boolean" } }
                },
                "PairEntry": {
                    "type": "object", "required": ["tenant", "job_type", "gpus", "gpu_type", "normalized_speed", "samples", "updated_unix_s"],
                    "description": "what the daemon learned of jobs of one type (gangs of `gpus`) sharing GPUs of `gpu_type` with a job of another type: their speed then over their speed alone (shared ÷ solo throughput from progress reports made once the pairing had lasted settle_s; each sample clamped to [0, 1]; smoothed ¾ old, ¼ new). Written only by the reports of `tenant`'s own jobs",
                    "properties": {
                        "tenant": { "type": "string" }, "job_type": { "type": "string" }, "gpus": { "type": "integer" }, "gpu_type": { "type": "string" },
                        "partner_tenant": { "type": "string", "description": "absent when the partner is another tenant's (for a tenant caller)" },
                        "partner_job_type": { "type": "string", "description": "absent when the partner is another tenant's (for a tenant caller)" },
                        "partner_other_tenant": { "type": "boolean", "description": "the partner type is another tenant's, not named" },
                        "normalized_speed": { "type": "number", "minimum": 0, "maximum": 1 }, "samples": { "type": "integer" }, "updated_unix_s": { "type": "integer" }
                    }
                },
                "Tenant": { "type": "object", "properties": { "name": { "type": "string" }, "weight": { "type": "number" }, "gpu_quota": { "type": ["integer", "null"] },
                    "webhook": { "oneOf": [{ "type": "null" }, { "$ref": "#/components/schemas/Webhook" }] } } },
                "Webhook": { "type": "object", "description": "A tenant's webhook as the admin sees it (never its secret); docs/webhooks.md",
                    "properties": {
                        "url": { "type": "string" }, "state": { "type": "string", "enum": ["active", "failing", "dead"] },
                        "pending": { "type": "integer", "description": "events waiting" }, "delivered": { "type": "integer" },
                        "dropped": { "type": "integer", "description": "events dropped: the queue was full, or the receiver was declared dead" },
                        "consecutive_failures": { "type": "integer" }, "last_error": { "type": ["string", "null"] }, "last_error_unix_s": { "type": ["integer", "null"] },
                        "last_delivered_unix_s": { "type": ["integer", "null"] }, "dead_since_unix_s": { "type": ["integer", "null"] }
                    }
                },
                "WebhookEvent": { "type": "object", "description": "The body POSTed to a webhook (schema version 1), signed in the Arbiter-Signature header: t=<unix s>,v1=<hex HMAC-SHA256(secret, t + \".\" + body)>. At least once: deduplicate by `id`",
                    "required": ["version", "id", "event", "tenant", "job_id", "to", "reason", "time_unix_s"],
                    "properties": {
                        "version": { "type": "integer", "const": 1 }, "id": { "type": "string", "description": "<job>-<n>: unique per job and transition; the idempotency key" },
                        "event": { "type": "string", "enum": ["started", "preempted", "succeeded", "failed", "cancelled"] },
                        "tenant": { "type": "string" }, "job_id": { "type": "integer" }, "name": { "type": ["string", "null"] },
                        "from": { "type": ["string", "null"] }, "to": { "type": "string" }, "reason": { "type": "string" },
                        "time_unix_s": { "type": "integer" }, "exit_code": { "type": "integer", "description": "on succeeded and failed, when there is one" }
                    }
                },
                "Error": { "type": "object", "properties": { "error": { "type": "string" }, "field": { "type": "string" } } }
            }
        },
        "paths": {
            "/v1/jobs": {
                "post": { "summary": "Submit a job (admin: ?tenant=NAME)", "security": bearer,
                    "parameters": [tenant_param, { "name": "Idempotency-Key", "in": "header", "required": false, "schema": { "type": "string" }, "description": "same as client_request_id (400 if both are given and differ)" }],
                    "requestBody": { "content": { "application/json": { "schema": { "$ref": "#/components/schemas/SubmitRequest" } } } },
                    "responses": {
                        "201": { "description": "{\"id\": N}" }, "200": { "description": "{\"id\": N, \"duplicate\": true}: the idempotency key was seen; nothing new created" },
                        "400": { "description": "invalid; names the field" }, "401": { "description": "no token" }, "403": { "description": "?tenant= another tenant" },
                        "409": { "description": "idempotency key reused with a different request" }, "413": { "description": "too large" },
                        "503": { "description": "the store cannot take writes now (a full disk); nothing was changed" } } },
                "get": { "summary": "List jobs, by id, a page at a time", "security": bearer,
                    "parameters": [query("state", json!({ "type": "string", "enum": JOB_STATES }), "only jobs in this state (400 if unknown)"), tenant_param,
                        query("limit", json!({ "type": "integer", "minimum": 1, "maximum": MAX_JOBS_PAGE, "default": DEFAULT_JOBS_PAGE }), "at most this many jobs"),
                        query("after", json!({ "type": "integer" }), "only jobs with a larger id (the previous page's next_after)")],
                    "responses": { "200": { "description": "{\"jobs\": [...], \"next_after\": ID or null when this is the last page}" }, "400": { "description": "unknown state or tenant, bad limit; names the parameter" } } }
            },
            "/v1/jobs/{id}": { "get": { "summary": "One job: state, GPUs, progress, history, pending reason, executed_s (seconds on GPUs over all runs, the run going on counted up to now), and shares_gpus_with: [SharedGpus] (the other jobs on its GPUs; also in GET /v1/jobs)", "security": bearer, "parameters": [id], "responses": { "200": { "description": "the job, with shares_gpus_with (see the SharedGpus schema)" }, "403": { "description": "another tenant's" }, "404": { "description": "no such job" } } } },
            "/v1/jobs/{id}/cancel": { "post": { "summary": "Cancel (checkpoint signal, then SIGKILL after grace_s). {id} may be `12_7` (task 7 of array 12); an array's id cancels every task of it (`array_tasks_cancelled` in the answer)", "security": bearer, "parameters": [id], "responses": { "202": { "description": "cancelling" }, "409": { "description": "already ended" } } } },
            "/v1/jobs/{id}/logs": { "get": {
                "summary": "stdout+stderr, streamed; at most 16 MiB (max_bytes) per response",
                "security": bearer,
                "parameters": [id,
                    query("tail_bytes", json!({ "type": "integer", "minimum": 0 }), "only the last N bytes"),
                    query("offset", json!({ "type": "integer", "minimum": 0 }), "start at this byte (not with tail_bytes)"),
                    query("max_bytes", json!({ "type": "integer", "minimum": 1, "maximum": MAX_LOG_RESPONSE_BYTES, "default": MAX_LOG_RESPONSE_BYTES }), "at most this many bytes")],
                "responses": { "200": { "description": "text/plain",
                    "headers": {
                        "x-arbiter-log-size": { "schema": { "type": "integer" }, "description": "bytes in the whole log" },
                        "x-arbiter-log-start": { "schema": { "type": "integer" }, "description": "offset of the first byte sent" },
                        "x-arbiter-log-truncated": { "schema": { "type": "boolean" }, "description": "true when the cap left out bytes that were asked for" } } },
                    "400": { "description": "bad parameter; names it" } } } },
            "/v1/jobs/{id}/progress": { "post": { "summary": "The job reports progress with its own token (ARBITER_JOB_TOKEN)", "parameters": [id], "responses": { "204": { "description": "recorded" } } } },
            "/v1/reservations": {
                "get": { "summary": "Reservations and maintenance windows not over yet; a tenant sees another tenant's as `\"tenant\": \"another tenant\"`", "security": bearer, "responses": { "200": { "description": "{\"reservations\": [{id, nodes, start_unix_s, end_unix_s, tenant, maintenance, reason}]}" } } },
                "post": { "summary": "Reserve nodes (admin): for `tenant`, or for maintenance without one. No run that could still be running at the start (by its max_run_time_s, else default_max_run_time_s) is placed there; at the start, runs there the reservation does not admit are preempted", "security": bearer,
                    "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object", "additionalProperties": false, "required": ["nodes", "start_unix_s", "duration_s", "reason"], "properties": {
                        "nodes": { "type": "array", "items": { "type": "string" } }, "start_unix_s": { "type": "integer" }, "duration_s": { "type": "integer", "minimum": 1, "maximum": 31622400 },
                        "tenant": { "type": "string" }, "reason": { "type": "string", "maxLength": 256 } } } } } },
                    "responses": { "201": { "description": "the reservation, with its id" }, "400": { "description": "a field names what is wrong" }, "403": { "description": "not the admin" } } }
            },
            "/v1/reservations/{id}": { "delete": { "summary": "Delete a reservation (admin)", "security": bearer, "parameters": [id], "responses": { "200": { "description": "deleted" }, "404": { "description": "no such reservation" } } } },
            "/v1/quotas": { "get": { "summary": "The quota tree: each node's quotas per GPU type (guaranteed, borrowing_limit, lending_limit), GPUs held and borrowed now, fair share at the last round, and borrowing (reclaimable) jobs now. A tenant sees its own node and its parents', never a sibling's; the admin sees every node and `definitions`, the groups as stored", "security": bearer,
                "responses": { "200": { "description": "{\"enforced\": bool, \"error\": text|null, \"gpu_types\": [...], \"groups\": [{name, parent, over_quota_weight, leaf, gpus: {TYPE: {guaranteed, borrowing_limit, lending_limit, held, borrowed, fair_share}}, borrowing_jobs}], \"definitions\": [...]}" } } } },
            "/v1/quotas/{name}": {
                "put": { "summary": "Set a quota group (admin): the whole group, replacing what was there; the tree is checked whole and refused with the numbers when children are guaranteed more than their parent", "security": bearer,
                    "parameters": [{ "name": "name", "in": "path", "required": true, "schema": { "type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$" } }],
                    "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object", "additionalProperties": false, "properties": {
                        "parent": { "type": ["string", "null"] }, "over_quota_weight": { "type": "number", "default": 1 },
                        "gpus": { "type": "object", "additionalProperties": { "type": "object", "additionalProperties": false, "properties": { "guaranteed": { "type": "integer" }, "borrowing_limit": { "type": "integer" }, "lending_limit": { "type": "integer" } } } } } } } } },
                    "responses": { "200": { "description": "the group as stored" }, "400": { "description": "names what is wrong, with the numbers" }, "403": { "description": "not the admin" } } },
                "delete": { "summary": "Delete a quota group (admin); refused (409) while groups name it as parent", "security": bearer,
                    "parameters": [{ "name": "name", "in": "path", "required": true, "schema": { "type": "string" } }],
                    "responses": { "200": { "description": "deleted" }, "400": { "description": "no such group" }, "409": { "description": "it has children" } } }
            },
            "/v1/cluster": { "get": { "summary": "GPUs, free GPUs, running jobs, policy. A tenant sees other tenants' running jobs only as the GPUs they hold ({\"gpus\": [...], \"other_tenant\": true}); `queued` counts its own, `queued_total` all", "security": bearer, "responses": { "200": { "description": "cluster state" } } } },
            "/v1/pairs": { "get": { "summary": "The learned co-location table: how fast each job type runs next to each other type on the same GPUs. The admin sees every entry; a tenant only its own job types' entries, and another tenant's partner type only as partner_other_tenant", "security": bearer,
                "responses": { "200": { "description": "{\"pairs\": [PairEntry...], \"settle_s\": N, \"policy\": NAME}", "content": { "application/json": { "schema": { "type": "object", "properties": { "pairs": { "type": "array", "items": { "$ref": "#/components/schemas/PairEntry" } }, "settle_s": { "type": "integer" }, "policy": { "type": "string" } } } } } }, "401": { "description": "no token" } } } },
            "/v1/tenants": {
                "get": { "summary": "Tenants (admin)", "security": bearer, "responses": { "200": { "description": "{\"tenants\": [Tenant...]}" } } },
                "post": { "summary": "Create a tenant; returns its token once (admin)", "security": bearer,
                    "requestBody": { "content": { "application/json": { "schema": { "type": "object", "required": ["name"], "additionalProperties": false,
                        "properties": { "name": { "type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$" }, "weight": { "type": "number", "default": 1 }, "gpu_quota": { "type": ["integer", "null"] }, "parent": { "type": "string", "description": "its quota group (GET /v1/quotas)" } } } } } },
                    "responses": { "201": { "description": "{\"name\", \"token\"}" }, "400": { "description": "bad name or weight" }, "409": { "description": "the tenant exists: use PATCH /v1/tenants/{name} or POST /v1/tenants/{name}/token" } } }
            },
            "/v1/tenants/{name}": {
                "patch": { "summary": "Change a tenant's weight, GPU quota (null: none) or webhook (null: none); its token stays (admin)", "security": bearer, "parameters": [name],
                    "requestBody": { "content": { "application/json": { "schema": { "type": "object", "additionalProperties": false,
                        "properties": { "weight": { "type": "number" }, "gpu_quota": { "type": ["integer", "null"] },
                            "webhook": { "type": ["string", "null"], "description": "http(s) URL receiving WebhookEvent POSTs; checked: no credentials, not the daemon's own address, not link-local; loopback/private only with [webhooks] allow_private" },
                            "rotate_webhook_secret": { "type": "boolean", "description": "make a new secret (shown once in webhook_secret)" } } } } } },
                    "responses": { "200": { "description": "the tenant, `held_by_quota`: the ids of its queued jobs that ask for more GPUs than its new quota (held until it is raised), and `webhook_secret` when a secret was made (shown once)", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Tenant" } } } }, "400": { "description": "bad value (field names it: `webhook` for a refused URL) or nothing to change" }, "404": { "description": "no such tenant" }, "409": { "description": "rotate_webhook_secret without a webhook" } } },
                "delete": { "summary": "Remove a tenant; its token stops working, its ended jobs stay on record (admin)", "security": bearer, "parameters": [name],
                    "responses": { "200": { "description": "{\"name\", \"removed\": true}" }, "404": { "description": "no such tenant" }, "409": { "description": "it has queued or running jobs" } } }
            },
            "/v1/tenants/{name}/token": {
                "post": { "summary": "A new token for the tenant, shown once; the old one stops working at once (admin)", "security": bearer, "parameters": [name],
                    "responses": { "200": { "description": "{\"name\", \"token\"}" }, "404": { "description": "no such tenant" } } }
            },
            "/v1/usage": { "get": { "summary": "What runs used, like Slurm's sreport: GPU-seconds, CPU core-seconds and memory GiB-seconds reserved, summed by the groupings of `by` over the window from `since` to now (each run's part inside it; runs going on up to now). A tenant sees its own usage only; the admin everyone's", "security": bearer,
                "parameters": [
                    { "name": "since", "in": "query", "schema": { "type": "string", "default": "7d" }, "description": "start of the window: a duration back from now (90m, 36h, 7d, 2w; a bare number is seconds; at most ten years), a UTC date YYYY-MM-DD, or all" },
                    { "name": "by", "in": "query", "schema": { "type": "string", "default": "tenant" }, "description": "comma-separated groupings: tenant, user, gpu-type, day (UTC; a run over midnight counts in each day for its part)" },
                    { "name": "tenant", "in": "query", "schema": { "type": "string" }, "description": "admin only: one tenant's usage" }
                ],
                "responses": { "200": { "description": "{\"since_unix_s\": N|null, \"until_unix_s\": N, \"by\": [...], \"rows\": [{\"key\": {\"tenant\": ..., ...}, \"runs\": N, \"running\": N, \"gpu_s\": X, \"cpu_s\": X, \"memory_gib_s\": X}], \"total\": {\"gpu_s\", \"cpu_s\", \"memory_gib_s\"}}" }, "400": { "description": "a bad since or by (the error names it)" }, "401": { "description": "no or unknown token" }, "403": { "description": "a tenant asking for another tenant's usage" } } } },
            "/v1/history": { "get": { "summary": "Admin only: the jobs that ran (finished or running), a page at a time, as a replay needs them (arbiter history export, arbiter whatif): submission, tenant, user, name, job type, GPUs and GPU types asked, priority, deadline, class, dependencies, runs, seconds held GPUs, progress, first start, end, array. Never the command, environment, directories or logs", "security": bearer,
                "parameters": [
                    { "name": "since", "in": "query", "schema": { "type": "string", "default": "all" }, "description": "only jobs submitted since: a duration back from now (90m, 36h, 30d, 2w), a UTC date YYYY-MM-DD, or all" },
                    { "name": "after", "in": "query", "schema": { "type": "integer" }, "description": "the page after this job id (next_after of the previous page)" },
                    { "name": "limit", "in": "query", "schema": { "type": "integer", "default": 10000, "maximum": 100000 } }
                ],
                "responses": { "200": { "description": "{\"jobs\": [{\"id\", \"tenant\", \"state\", \"submitted_unix_s\", \"gpus\", \"runs\", \"executed_s\", \"first_start_unix_s\", \"end_unix_s\", ...}], \"next_after\": N|null}" }, "400": { "description": "a bad since or limit (the error names it)" }, "401": { "description": "no or unknown token" }, "403": { "description": "a tenant's token" } } } },
            "/metrics": { "get": { "summary": "Prometheus metrics. Without a token: counts only (jobs by state, GPUs, rounds, submissions; nothing that names a tenant or a job). With the admin token or the scrape token (config metrics_token_file): also arbiter_tenant_gpu_seconds_total{tenant, gpu_type}. A tenant's token is refused (403) rather than answered with less", "responses": { "200": { "description": "text" }, "401": { "description": "an unknown token" }, "403": { "description": "a tenant's token" } } } }
        }
    })
}
