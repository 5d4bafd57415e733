//! Tasks (protocol 2025-11-25) belong to whoever created them. Task ids are guessable (servers
//! often count; the core names each for its server, `a__t-1`), and one gateway serves every
//! session: without this, any client could read
//! another's task status and result (`tasks/get`, `tasks/result`, `tasks/list`), cancel it,
//! receive its `notifications/tasks/status`, or answer the questions it asks its creator
//! (`elicitation/create` tagged with the task). Pure: the mux asks.

use std::collections::HashMap;

use serde_json::Value;

use super::hub::SessionKey;
use crate::mcp::Field;

/// Who created a task: a session, or, for a stateless (2026-07-28) client, which has no session
/// that outlives one request, its identity (`None`: unauthenticated).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Owner {
    Session(SessionKey),
    Stateless(Option<String>),
}

/// How many tasks of one owner the gateway remembers. A session's are forgotten when it ends,
/// but a stateless client's owner outlives every request, and a long session may create tasks
/// without end: past this, the owner's oldest task that has ended (a final status was seen) is
/// forgotten first, else its oldest. A forgotten task is `Unknown task` to everyone, its creator
/// included (never another's to read), as it is once its server has let it go.
pub const MAX_TASKS_PER_OWNER: usize = 1024;

/// What the gateway knows of one task.
#[derive(Debug)]
struct Created {
    owner: Owner,
    server: Option<String>,
    /// Creation order (oldest first), among all tasks.
    order: u64,
    /// A final status was seen.
    ended: bool,
    /// The mux's progress token (key) the task carries on, if any: it goes with the task.
    progress: Option<String>,
}

/// Which owner created each task the gateway has seen created, and on which server; and the
/// progress tokens that live on with a task after the request that created it was answered.
#[derive(Debug, Default)]
pub struct TaskOwners {
    owners: HashMap<String, Created>,
    /// How many tasks each owner has in `owners`.
    counts: HashMap<Owner, usize>,
    next_order: u64,
    /// The mux's progress token (key) → the session, the client's own token and the task that
    /// carries it, for tasks in `owners` only (each names its own in [`Created::progress`]). A
    /// key is the core's request id, which a stdio host's own ids may make again: the newest
    /// task to carry a key has it.
    progress: HashMap<String, (SessionKey, Value, String)>,
}

/// The task id a message names: a request's `params.taskId`, a status notification's
/// `params.taskId`.
pub fn named_task(message: &Value) -> Option<&str> {
    message.at(&["params", "taskId"]).and_then(Value::as_str)
}

/// The task a server's request is about (`_meta["io.modelcontextprotocol/related-task"]`).
pub fn related_task(message: &Value) -> Option<&str> {
    message
        .at(&["params", "_meta", crate::mcp::RELATED_TASK, "taskId"])
        .and_then(Value::as_str)
}

impl TaskOwners {
    /// Notes the task `owner`'s request to `server` created, when its answer is a
    /// `CreateTaskResult` (`result.task.taskId`).
    pub fn note_created(&mut self, owner: Owner, server: Option<String>, answer: &Value) {
        let Some(task) = crate::mcp::created_task(answer) else {
            return;
        };
        // The same id again (a server that reuses ids) is the newer task's.
        self.remove(task);
        if self.counts.get(&owner).copied().unwrap_or(0) >= MAX_TASKS_PER_OWNER {
            self.forget_oldest_of(&owner);
        }
        self.next_order += 1;
        *self.counts.entry(owner.clone()).or_default() += 1;
        let created = Created {
            owner,
            server,
            order: self.next_order,
            ended: false,
            progress: None,
        };
        self.owners.insert(task.to_string(), created);
    }

    /// Forgets `owner`'s oldest ended task, or its oldest when none has ended.
    fn forget_oldest_of(&mut self, owner: &Owner) {
        let oldest = self
            .owners
            .iter()
            .filter(|(_, created)| created.owner == *owner)
            .min_by_key(|(_, created)| (!created.ended, created.order))
            .map(|(task, _)| task.clone());
        if let Some(task) = oldest {
            self.remove(&task);
        }
    }

    /// Forgets `task`, and the progress token it carried.
    fn remove(&mut self, task: &str) {
        let Some(created) = self.owners.remove(task) else {
            return;
        };
        if let Some(token_key) = &created.progress {
            self.drop_token(token_key, task);
        }
        self.uncount(&created.owner);
    }

    /// Forgets progress token `token_key` when `task` is still the one carrying it.
    fn drop_token(&mut self, token_key: &str, task: &str) {
        if self
            .progress
            .get(token_key)
            .is_some_and(|(_, _, of)| of == task)
        {
            self.progress.remove(token_key);
        }
    }

    fn uncount(&mut self, owner: &Owner) {
        if let Some(count) = self.counts.get_mut(owner) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.counts.remove(owner);
            }
        }
    }

    /// Who created `task`.
    /// The server a task was created on, when the gateway saw it created there.
    pub fn server_of(&self, task: &str) -> Option<&str> {
        self.owners.get(task)?.server.as_deref()
    }

    pub fn owner(&self, task: &str) -> Option<&Owner> {
        self.owners.get(task).map(|created| &created.owner)
    }

    /// The session that created `task`, when a session did.
    pub fn session(&self, task: &str) -> Option<SessionKey> {
        match self.owner(task) {
            Some(Owner::Session(key)) => Some(*key),
            _ => None,
        }
    }

    /// The session that created `task` on `server`: a server's question about a task goes to
    /// its creator only when that server is the one the task was created on (another server
    /// naming the id must not reach that client).
    /// Whether `owner` created `task` (a task nobody here created is nobody's).
    pub fn created_by(&self, task: &str, owner: &Owner) -> bool {
        self.owners
            .get(task)
            .is_some_and(|created| created.owner == *owner)
    }

    pub fn session_on(&self, task: &str, server: &str) -> Option<SessionKey> {
        match self.owners.get(task) {
            Some(Created {
                owner: Owner::Session(key),
                server: Some(on),
                ..
            }) if on == server => Some(*key),
            _ => None,
        }
    }

    /// Takes out of a `tasks/list` answer for `owner` the tasks others created (or that nobody
    /// here created).
    pub fn keep_own(&self, owner: &Owner, answer: &mut Value) {
        let Some(Value::Array(tasks)) = answer
            .get_mut("result")
            .and_then(|result| result.get_mut("tasks"))
        else {
            return;
        };
        tasks.retain(|task| {
            task.field("taskId")
                .and_then(Value::as_str)
                .is_some_and(|id| self.owner(id) == Some(owner))
        });
    }

    /// Forgets the tasks of a session that ended (a stateless client's outlive its requests).
    pub fn forget(&mut self, key: SessionKey) {
        let session = Owner::Session(key);
        self.owners.retain(|_, created| created.owner != session);
        self.counts.remove(&session);
        self.progress.retain(|_, (session, _, _)| *session != key);
    }

    /// A task-augmented request of session `key` with a progress token was answered: when the
    /// answer created a task (noted first with [`TaskOwners::note_created`]), the token stays
    /// valid until the task ends (2025-11-25) or is forgotten, and the server's progress on it
    /// (under the mux's token `token_key`) still reaches the session.
    pub fn keep_progress(
        &mut self,
        token_key: String,
        key: SessionKey,
        token: Value,
        answer: &Value,
    ) {
        let Some(task) = crate::mcp::created_task(answer).map(str::to_string) else {
            return;
        };
        let Some(created) = self.owners.get_mut(&task) else {
            return;
        };
        let old = created.progress.replace(token_key.clone());
        if let Some(old) = old.filter(|old| *old != token_key) {
            self.drop_token(&old, &task);
        }
        let carried = (key, token, task.clone());
        if let Some((_, _, before)) = self.progress.insert(token_key.clone(), carried)
            && before != task
            && let Some(earlier) = self.owners.get_mut(&before)
            && earlier.progress.as_deref() == Some(token_key.as_str())
        {
            earlier.progress = None;
        }
    }

    /// The session and the client's own token for the mux's progress token of a created task.
    pub fn progress(&self, token_key: &str) -> Option<(SessionKey, &Value)> {
        self.progress
            .get(token_key)
            .map(|(key, token, _)| (*key, token))
    }

    /// A status notification: a final status ends the task's progress token, and makes the
    /// task the first of its owner's to be forgotten ([`MAX_TASKS_PER_OWNER`]).
    pub fn status(&mut self, notification: &Value) {
        let ended = crate::mcp::task_ended(notification.at(&["params", "status"]));
        if let (true, Some(task)) = (ended, named_task(notification))
            && let Some(created) = self.owners.get_mut(task)
        {
            created.ended = true;
            if let Some(token_key) = created.progress.take() {
                let task = task.to_string();
                self.drop_token(&token_key, &task);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_task_is_its_creators_only() {
        let mut owners = TaskOwners::default();
        let created = |task: &str| json!({"result": {"task": {"taskId": task}}});
        let on = |server: &str| Some(server.to_string());
        owners.note_created(Owner::Session(1), on("a"), &created("t-1"));
        owners.note_created(Owner::Session(2), on("b"), &created("t-2"));
        owners.note_created(
            Owner::Stateless(Some("ci".into())),
            on("a"),
            &created("t-3"),
        );
        owners.note_created(
            Owner::Session(2),
            on("a"),
            &json!({"result": {"content": []}}),
        );
        assert_eq!(owners.session_on("t-1", "a"), Some(1));
        assert_eq!(
            owners.session_on("t-1", "b"),
            None,
            "another server's question"
        );
        assert_eq!(owners.session("t-1"), Some(1));
        assert_eq!(owners.session("t-3"), None);
        assert_eq!(
            owners.owner("t-3"),
            Some(&Owner::Stateless(Some("ci".into())))
        );
        assert_eq!(owners.owner("t-9"), None);
        let mut listed = json!({"result": {"tasks": [
            {"taskId": "t-1"}, {"taskId": "t-2"}, {"taskId": "t-9"}, {"status": "no id"}
        ]}});
        owners.keep_own(&Owner::Session(1), &mut listed);
        assert_eq!(listed, json!({"result": {"tasks": [{"taskId": "t-1"}]}}));
        owners.forget(1);
        assert_eq!(owners.owner("t-1"), None);
        assert!(
            owners.owner("t-3").is_some(),
            "a stateless client's task stays"
        );
        assert_eq!(
            named_task(&json!({"params": {"taskId": "t-2"}})),
            Some("t-2")
        );
        let asked = json!({"params": {"_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t-2"}}}});
        assert_eq!(related_task(&asked), Some("t-2"));
    }

    #[test]
    fn an_owner_is_remembered_for_a_bounded_number_of_tasks_the_ended_forgotten_first() {
        let mut owners = TaskOwners::default();
        let created = |task: &str| json!({"result": {"task": {"taskId": task}}});
        let ended = |task: &str| json!({"method": "notifications/tasks/status", "params": {"taskId": task, "status": "completed"}});
        let stateless = Owner::Stateless(None);
        let other = Owner::Session(7);
        owners.note_created(other.clone(), None, &created("other-1"));
        for n in 0..MAX_TASKS_PER_OWNER {
            owners.note_created(stateless.clone(), None, &created(&format!("s-{n}")));
        }
        owners.status(&ended("s-5"));
        owners.status(&ended("s-9"));
        // Full: the next one forgets the oldest ended task (s-5), then s-9, then the oldest.
        owners.note_created(stateless.clone(), None, &created("s-new-1"));
        assert_eq!(owners.owner("s-5"), None);
        assert_eq!(owners.owner("s-0"), Some(&stateless));
        owners.note_created(stateless.clone(), None, &created("s-new-2"));
        assert_eq!(owners.owner("s-9"), None);
        owners.note_created(stateless.clone(), None, &created("s-new-3"));
        assert_eq!(owners.owner("s-0"), None, "then the oldest");
        assert_eq!(owners.owner("s-1"), Some(&stateless));
        assert_eq!(owners.owners.len(), MAX_TASKS_PER_OWNER + 1);
        // Another owner's tasks are never the ones forgotten.
        assert_eq!(owners.owner("other-1"), Some(&other));
        // A reused id is the newer task's, counted once.
        owners.note_created(other.clone(), None, &created("s-new-3"));
        assert_eq!(owners.owner("s-new-3"), Some(&other));
        assert_eq!(owners.counts[&stateless], MAX_TASKS_PER_OWNER - 1);
        assert_eq!(owners.counts[&other], 2);
        owners.forget(7);
        assert_eq!(owners.counts.get(&other), None);
        assert_eq!(owners.owner("other-1"), None);
    }

    #[test]
    fn a_tasks_progress_token_goes_when_the_task_ends_or_is_forgotten() {
        let mut owners = TaskOwners::default();
        let created = |task: &str| json!({"result": {"task": {"taskId": task}}});
        let session = Owner::Session(3);
        let create = |owners: &mut TaskOwners, n: usize| {
            let answer = created(&format!("t-{n}"));
            owners.note_created(session.clone(), None, &answer);
            owners.keep_progress(format!("p-{n}"), 3, json!(n), &answer);
        };
        for n in 0..MAX_TASKS_PER_OWNER {
            create(&mut owners, n);
        }
        assert_eq!(owners.progress("p-0"), Some((3, &json!(0))));
        // Past the bound the oldest task is forgotten, and its token with it.
        create(&mut owners, MAX_TASKS_PER_OWNER);
        assert_eq!(owners.owner("t-0"), None);
        assert_eq!(owners.progress("p-0"), None);
        assert_eq!(owners.progress.len(), MAX_TASKS_PER_OWNER);
        // A final status ends it too.
        owners.status(&json!({"method": "notifications/tasks/status",
            "params": {"taskId": "t-1", "status": "failed"}}));
        assert_eq!(owners.progress("p-1"), None);
        assert_eq!(owners.progress("p-2"), Some((3, &json!(2))));
        // A token for an answer that created no task the gateway knows is not kept.
        owners.keep_progress("p-x".into(), 3, json!("x"), &json!({"result": {}}));
        assert_eq!(owners.progress("p-x"), None);
    }

    #[test]
    fn a_progress_token_made_again_belongs_to_the_newest_task_only() {
        let mut owners = TaskOwners::default();
        let created = |task: &str| json!({"result": {"task": {"taskId": task}}});
        let ended = |task: &str| {
            json!({"method": "notifications/tasks/status",
            "params": {"taskId": task, "status": "completed"}})
        };
        // A stdio host used its request id 5 twice, once for each task: the same key.
        for (task, token) in [("t-1", "a"), ("t-2", "b")] {
            owners.note_created(Owner::Session(0), None, &created(task));
            owners.keep_progress("5".into(), 0, json!(token), &created(task));
        }
        owners.status(&ended("t-1"));
        assert_eq!(owners.progress("5"), Some((0, &json!("b"))), "t-2's still");
        owners.status(&ended("t-2"));
        assert_eq!(owners.progress("5"), None);
    }
}
