//! Tasks (protocol 2025-11-25) belong to the session that created them. A server's task ids
//! are its own (often a counter), and one gateway serves every session: without this, any
//! client could read another's task status and result (`tasks/get`, `tasks/result`,
//! `tasks/list`), cancel it, or receive its `notifications/tasks/status`. Pure: the mux asks.

use std::collections::HashMap;

use serde_json::Value;

use super::hub::SessionKey;
use crate::mcp::Field;

/// Which session created each task the gateway has seen created.
#[derive(Debug, Default)]
pub struct TaskOwners {
    owners: HashMap<String, SessionKey>,
}

/// The task id a message names: a request's `params.taskId`, a status notification's
/// `params.taskId`.
pub fn named_task(message: &Value) -> Option<&str> {
    message.at(&["params", "taskId"]).and_then(Value::as_str)
}

impl TaskOwners {
    /// Notes the task session `key`'s request created, when its answer is a `CreateTaskResult`
    /// (`result.task.taskId`).
    pub fn note_created(&mut self, key: SessionKey, answer: &Value) {
        if let Some(task) = answer
            .at(&["result", "task", "taskId"])
            .and_then(Value::as_str)
        {
            self.owners.insert(task.to_string(), key);
        }
    }

    /// The session that created `task`.
    pub fn owner(&self, task: &str) -> Option<SessionKey> {
        self.owners.get(task).copied()
    }

    /// Takes out of a `tasks/list` answer for session `key` the tasks other sessions created (or
    /// that no session of this gateway created).
    pub fn keep_own(&self, key: SessionKey, answer: &mut Value) {
        let Some(Value::Array(tasks)) = answer
            .get_mut("result")
            .and_then(|result| result.get_mut("tasks"))
        else {
            return;
        };
        tasks.retain(|task| {
            task.field("taskId")
                .and_then(Value::as_str)
                .is_some_and(|id| self.owner(id) == Some(key))
        });
    }

    /// Forgets the tasks of a session that ended.
    pub fn forget(&mut self, key: SessionKey) {
        self.owners.retain(|_, owner| *owner != key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_task_is_its_creators_only() {
        let mut owners = TaskOwners::default();
        owners.note_created(1, &json!({"result": {"task": {"taskId": "t-1"}}}));
        owners.note_created(2, &json!({"result": {"task": {"taskId": "t-2"}}}));
        owners.note_created(2, &json!({"result": {"content": []}}));
        assert_eq!(owners.owner("t-1"), Some(1));
        assert_eq!(owners.owner("t-2"), Some(2));
        assert_eq!(owners.owner("t-3"), None);
        let mut listed = json!({"result": {"tasks": [
            {"taskId": "t-1"}, {"taskId": "t-2"}, {"taskId": "t-9"}, {"status": "no id"}
        ]}});
        owners.keep_own(1, &mut listed);
        assert_eq!(listed, json!({"result": {"tasks": [{"taskId": "t-1"}]}}));
        owners.forget(1);
        assert_eq!(owners.owner("t-1"), None);
        assert_eq!(
            named_task(&json!({"params": {"taskId": "t-2"}})),
            Some("t-2")
        );
    }
}
