from django import forms
from django.utils.translation import gettext_lazy as _

from apps.core.jsondepth import BoundedJSONDecoder
from apps.health.models import IncidentState, RuleAction, Severity
from apps.health.services.runbook import ACTIONS


class TransitionForm(forms.Form):
    to = forms.ChoiceField(label=_("Move to"), choices=IncidentState.choices)
    reason = forms.CharField(label=_("Reason"), max_length=2000)


class NodeActionForm(forms.Form):
    action = forms.ChoiceField(label=_("Action"), choices=[(a, a) for a in ACTIONS])
    reason = forms.CharField(label=_("Reason"), max_length=2000, required=False)
    incident = forms.IntegerField(required=False, min_value=1)  # started from this incident's page


class RuleTuneForm(forms.Form):
    key = forms.SlugField(label=_("Rule"))
    severity = forms.ChoiceField(label=_("Severity"), choices=Severity.choices)
    action = forms.ChoiceField(label=_("Action"), choices=RuleAction.choices)
    enabled = forms.BooleanField(label=_("Enabled"), required=False)
    params = forms.JSONField(label=_("Parameters"), decoder=BoundedJSONDecoder)
    reason = forms.CharField(label=_("Reason"), max_length=2000, required=False)
