from django import forms

from apps.health.models import IncidentState, RuleAction, Severity
from apps.health.services.runbook import ACTIONS


class TransitionForm(forms.Form):
    to = forms.ChoiceField(choices=IncidentState.choices)
    reason = forms.CharField(max_length=2000)


class NodeActionForm(forms.Form):
    action = forms.ChoiceField(choices=[(a, a) for a in ACTIONS])
    reason = forms.CharField(max_length=2000, required=False)
    incident = forms.IntegerField(required=False, min_value=1)  # started from this incident's page


class RuleTuneForm(forms.Form):
    key = forms.SlugField()
    severity = forms.ChoiceField(choices=Severity.choices)
    action = forms.ChoiceField(choices=RuleAction.choices)
    enabled = forms.BooleanField(required=False)
    params = forms.JSONField()
    reason = forms.CharField(max_length=2000, required=False)
