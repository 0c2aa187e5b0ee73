"""Around a release: the checks before any gate goes (`guard`, `refusers`), the duties after it
(`aftercare`), gated pods that left their group or joined Kubernetes' own gangs (`strays`, `native`),
owners that can never complete a group (`owners`, `stages`, `ownership`) and what a held group's owner
and members are told (`relays`, `relaying`); what the guard and the after-release duties remember per
group (`memory`, pure).

The folder map and import rule: docs/internals.md."""
