//! Task ids through a gateway (tasks, protocol 2025-11-25).
//!
//! Each server makes up its own task ids, and many count from 1, so two servers behind one
//! gateway can hand out the same id. Keyed by the raw id, the host's `tasks/get` of one server's
//! task would reach whichever server answered last with that id, and a hostile server could take
//! over another's task (and answer for it) by returning the same id. So the host sees
//! `<server><separator><id>`, as it sees tool names: the prefix names the one server that made
//! the task (a server name never contains the separator), and a host's `tasks/*` request goes
//! back to that server with the server's own id. `Single` passes ids as they are.
//!
//! A server's other spellings of these keys (`TaskId`, `ｔａｓｋ`, `_Meta`: what a lenient host
//! reads as the key) are taken out first, so a host reads no id airlock did not name. Tasks the
//! host runs for a server's own requests are not offered to a gateway's servers (one server could
//! read another's): the host's `tasks` capability is not passed on, and a server's `tasks/*`
//! request to the host is declined.
//!
//! Pure: functions of the message and the server's name.

use serde_json::Value;

use crate::gateway::names::split;
use crate::mcp::lenient::{drop_other_spellings, reads_as_one_of};
use crate::mcp::{Field, RELATED_TASK, task_ended};

/// The host-facing id of a task `server` made.
fn host_facing(task: &str, server: &str, separator: &str) -> String {
    format!("{server}{separator}{task}")
}

/// Names the task id at `slot` (when it is a string) for the host.
fn rename(slot: Option<&mut Value>, server: &str, separator: &str) {
    if let Some(Value::String(task)) = slot {
        *task = host_facing(task, server, separator);
    }
}

/// Takes out of `holder` (when an object) the other spellings of `keys`, and hands it back.
fn exact<'a>(holder: Option<&'a mut Value>, keys: &[&str]) -> Option<&'a mut Value> {
    let holder = holder?;
    if let Value::Object(object) = &mut *holder {
        let removed = drop_other_spellings(object, keys);
        if let Some(first) = removed.first() {
            tracing::warn!(
                "took {} key(s) out of a server's message that a lenient host would read as a task's, e.g. {first:?}",
                removed.len()
            );
        }
    }
    Some(holder)
}

/// The task id of `holder`'s `_meta` related-task, its other spellings taken out on the way.
fn related_task_slot(holder: Option<&mut Value>) -> Option<&mut Value> {
    let meta = exact(holder, &["_meta"])?.field_mut("_meta");
    let related = exact(meta, &[RELATED_TASK])?.field_mut(RELATED_TASK);
    exact(related, &["taskId"])?.field_mut("taskId")
}

/// A server's answer to a host request: the task a `CreateTaskResult` made (`result.task`), the
/// task a `tasks/get` or `tasks/cancel` answer describes (`result.taskId`, read only when
/// `answers_task_request`: another result may have a key of that name that is no task's), and
/// the task `tasks/result` names in its `_meta`.
pub fn name_in_answer(
    message: &mut Value,
    answers_task_request: bool,
    server: &str,
    separator: &str,
) {
    let keys: &[&str] = if answers_task_request {
        &["task", "taskId"]
    } else {
        &["task"]
    };
    let Some(result) = exact(message.field_mut("result"), keys) else {
        return;
    };
    let task = exact(result.field_mut("task"), &["taskId"]);
    rename(task.and_then(|t| t.field_mut("taskId")), server, separator);
    if answers_task_request {
        rename(result.field_mut("taskId"), server, separator);
    }
    rename(related_task_slot(Some(result)), server, separator);
}

/// The task (the server's own id) a server's answer to a host's `tasks/*` request shows ended: a
/// `tasks/get` or `tasks/cancel` answer in a final status, or a `tasks/result` answer (given
/// once the task ended), which names its task in `_meta`.
pub fn ended_in_answer(answer: &Value) -> Option<&str> {
    let result = answer.field("result")?;
    if let Some(task) = result.at(&["_meta", RELATED_TASK, "taskId"]) {
        return task.as_str();
    }
    if task_ended(result.field("status")) {
        return result.field("taskId").and_then(Value::as_str);
    }
    None
}

/// The task a server's `notifications/tasks/status` shows ended.
pub fn ended_in_status(notification: &Value) -> Option<&str> {
    let params = notification.field("params")?;
    if task_ended(params.field("status")) {
        return params.field("taskId").and_then(Value::as_str);
    }
    None
}

/// One task of a server's `tasks/list` page.
pub fn name_listed(task: &mut Value, server: &str, separator: &str) {
    rename(
        exact(Some(task), &["taskId"]).and_then(|t| t.field_mut("taskId")),
        server,
        separator,
    );
}

/// A server's request or notification: the task its `_meta` relates it to, and the task a
/// `notifications/tasks/status` describes.
pub fn name_in_server_message(message: &mut Value, method: &str, server: &str, separator: &str) {
    let params = message.field_mut("params");
    if method == STATUS {
        if let Some(params) = exact(params, &["taskId"]) {
            rename(params.field_mut("taskId"), server, separator);
            rename(related_task_slot(Some(params)), server, separator);
        }
        return;
    }
    rename(related_task_slot(params), server, separator);
}

/// The host's answer to a server's request: the related task its `_meta` names goes back to the
/// server as the server's own id when it is one of that server's; a task of another server's is
/// not the server's to see, and is taken out.
pub fn unname_in_host_answer(message: &mut Value, server: &str, separator: &str) {
    let Some(meta) = exact(message.field_mut("result"), &["_meta"])
        .and_then(|result| exact(result.field_mut("_meta"), &[RELATED_TASK]))
    else {
        return;
    };
    exact(meta.field_mut(RELATED_TASK), &["taskId"]);
    let own = meta
        .at(&[RELATED_TASK, "taskId"])
        .and_then(Value::as_str)
        .and_then(|task| split(task, separator))
        .filter(|(named, task)| *named == server && !task.is_empty())
        .map(|(_, task)| task.to_string());
    match own {
        Some(task) => meta[RELATED_TASK]["taskId"] = Value::String(task),
        None => {
            if let Some(meta) = meta.as_object_mut() {
                meta.remove(RELATED_TASK);
            }
        }
    }
}

/// Whether a server's request to the host is about the host's own tasks (`tasks/get`, ...), in
/// any spelling a lenient host reads as one.
pub fn about_host_tasks(method: &str) -> bool {
    reads_as_one_of(
        method,
        &["tasks/get", "tasks/result", "tasks/cancel", "tasks/list"],
    )
}

/// A server's notification spelled otherwise than `notifications/tasks/status` but read as it by
/// a lenient host: it would name a task airlock did not name, so it is dropped.
pub fn lookalike_status(method: &str) -> bool {
    method != STATUS && reads_as_one_of(method, &[STATUS])
}

const STATUS: &str = "notifications/tasks/status";

/// A server's request made task-augmented (`params.task`, any spelling): the host's tasks are not
/// offered to a gateway's servers, so the host runs it as a plain request, whose answer comes
/// back to the server that asked.
pub fn make_plain(request: &mut Value) {
    if let Some(Value::Object(params)) = request.field_mut("params") {
        params.retain(|key, _| !reads_as_one_of(key, &["task"]));
    }
}

/// A host's `tasks/get`, `tasks/result` or `tasks/cancel`: the server the task's id names and the
/// server's own id, put back into the request. `None` (nothing changed) when the id names no
/// server: no server made such a task.
pub fn take_server_of(message: &mut Value, separator: &str) -> Option<String> {
    let slot = message.field_mut("params")?.field_mut("taskId")?;
    let (server, task) = split(slot.as_str()?, separator).filter(|(_, task)| !task.is_empty())?;
    let server = server.to_string();
    *slot = Value::String(task.to_string());
    Some(server)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_task_id_a_server_sends_is_named_for_its_server() {
        let mut created =
            json!({"id": 1, "result": {"task": {"taskId": "1", "status": "working"}}});
        name_in_answer(&mut created, false, "a", "__");
        assert_eq!(created["result"]["task"]["taskId"], "a__1");

        let mut got = json!({"id": 1, "result": {"taskId": "1", "status": "completed"}});
        name_in_answer(&mut got, true, "a", "__");
        assert_eq!(got["result"]["taskId"], "a__1");

        // A tool's result with a key of that name is no task's.
        let mut tool = json!({"id": 1, "result": {"taskId": "x", "content": []}});
        name_in_answer(&mut tool, false, "a", "__");
        assert_eq!(tool["result"]["taskId"], "x");

        let mut result = json!({"id": 1, "result": {"content": [],
            "_meta": {RELATED_TASK: {"taskId": "7"}}}});
        name_in_answer(&mut result, true, "b", "__");
        assert_eq!(result["result"]["_meta"][RELATED_TASK]["taskId"], "b__7");

        let mut status = json!({"method": "notifications/tasks/status",
            "params": {"taskId": "1", "status": "input_required"}});
        name_in_server_message(&mut status, "notifications/tasks/status", "a", "--");
        assert_eq!(status["params"]["taskId"], "a--1");

        let mut question = json!({"id": 3, "method": "elicitation/create",
            "params": {"message": "?", "_meta": {RELATED_TASK: {"taskId": "1"}}}});
        name_in_server_message(&mut question, "elicitation/create", "a", "__");
        assert_eq!(question["params"]["_meta"][RELATED_TASK]["taskId"], "a__1");

        let mut listed = json!({"taskId": "9", "status": "working"});
        name_listed(&mut listed, "c", "__");
        assert_eq!(listed["taskId"], "c__9");
    }

    #[test]
    fn a_host_request_goes_back_to_the_server_its_task_id_names() {
        let mut get = json!({"id": 1, "method": "tasks/get", "params": {"taskId": "a__1__x"}});
        assert_eq!(take_server_of(&mut get, "__").as_deref(), Some("a"));
        assert_eq!(get["params"]["taskId"], "1__x");

        let mut unnamed = json!({"id": 1, "method": "tasks/get", "params": {"taskId": "1"}});
        assert_eq!(take_server_of(&mut unnamed, "__"), None);
        assert_eq!(unnamed["params"]["taskId"], "1");

        let mut number = json!({"id": 1, "method": "tasks/get", "params": {"taskId": 1}});
        assert_eq!(take_server_of(&mut number, "__"), None);
    }
}
